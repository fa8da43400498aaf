package request

import (
	"strings"
	"testing"

	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
	"github.com/scw-lb-ipam/scw-lb-ipam/neighbours"
)

// TestForeignPoolAfterRename: a Service admitted with MetalLB's pool word
// whose pool was renamed since is read as before: an UPDATE that asks for
// the same compares equal and is admitted, as one written with
// scw-lb-ipam.io/pool is. Only a plan (a CREATE, or an UPDATE that asks for
// something else) refuses the name, naming the word the user wrote.
func TestForeignPoolAfterRename(t *testing.T) {
	cfg, err := ipam.ParseConfig([]byte(planConfig))
	if err != nil {
		t.Fatal(err)
	}
	ann := map[string]string{neighbours.AnnotationMetalLBPool: "dc-renamed"}
	before, _, err := Read(cfg, "payments", ann, "")
	if err != nil {
		t.Fatalf("Read = %v, want the word read without looking the pool up", err)
	}
	after, _, err := Read(cfg, "payments", ann, "")
	if err != nil || !before.Same(after, nil) {
		t.Fatalf("the same word read twice: %+v, %+v, %v; want the same request", before, after, err)
	}
	_, err = NewPlan(cfg, "payments", after)
	want := `annotation metallb.io/address-pool: value "dc-renamed": read as scw-lb-ipam.io/pool, but scw-lb-ipam has no pool "dc-renamed"; pools namespace payments may use:`
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("NewPlan = %v, want %q…", err, want)
	}
}
