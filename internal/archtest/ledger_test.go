package archtest

import (
	"go/types"
	"path/filepath"
	"testing"

	"golang.org/x/tools/go/packages"
)

// TestLedgerParsedOnce fails when shipped code parses an IP's tags anywhere
// but where an IP enters the process, ipam.Read: every rule judges the
// Reservation read there, so no two readers can see one IP differently.
func TestLedgerParsedOnce(t *testing.T) {
	pkgs := shipped(t, packages.NeedName|packages.NeedFiles|packages.NeedSyntax|packages.NeedTypes|packages.NeedTypesInfo)
	var parse types.Object
	if p := pkgs["ipam"]; p != nil {
		parse = p.Types.Scope().Lookup("ParseEntry")
	}
	if parse == nil {
		t.Fatal("ipam.ParseEntry not found: the check would pass on nothing")
	}
	callers := 0
	for name, p := range pkgs {
		for id, obj := range p.TypesInfo.Uses {
			if obj != parse {
				continue
			}
			pos := p.Fset.Position(id.Pos())
			callers++
			if file := filepath.Base(pos.Filename); name != "ipam" || file != "reservation.go" {
				t.Errorf("%s parses an IP's tags: read the IP with ipam.Read where it enters the process, and judge the Reservation", pos)
			}
		}
	}
	if callers == 0 {
		t.Fatal("no use of ipam.ParseEntry found: the check would pass on nothing")
	}
}
