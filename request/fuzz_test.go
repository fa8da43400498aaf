package request

import (
	"strings"
	"testing"

	"github.com/scw-lb-ipam/scw-lb-ipam/ccm"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
	"github.com/scw-lb-ipam/scw-lb-ipam/neighbours"
)

// FuzzParseRequest: any annotation values parse or are refused with the
// annotation's name; nothing panics, and what parses is what was written.
func FuzzParseRequest(f *testing.F) {
	f.Add("dc-link", "172.16.4.210", "", "", "")
	f.Add("dc-link,general", "", "", "", "true")
	f.Add("", "", "8a7ff36c-7e00-441f-bfda-b6bdcb8ecc5f", "", "")
	f.Add("", "fd00::1,10.0.0.1", "", "8a7ff36c-7e00-441f-bfda-b6bdcb8ecc5f", "false")
	f.Add(" a , b ", "1.2.3.4,1.2.3.4", "x", "y", "maybe")
	f.Fuzz(func(t *testing.T, pool, address, ids, raw, allow string) {
		ann := map[string]string{}
		for k, v := range map[string]string{AnnotationPool: pool, AnnotationAddress: address, AnnotationIPAMIDs: ids, ccm.AnnotationPrivateIPIDs: raw, AnnotationAllowIPChange: allow} {
			if v != "" {
				ann[k] = v
			}
		}
		r, err := Parse(ann)
		if err != nil {
			if !(strings.HasPrefix(err.Error(), "annotation ") || strings.HasPrefix(err.Error(), "field spec.")) || len(err.Error()) > 2000 {
				t.Fatalf("unclear or unbounded error: %.300q", err.Error())
			}
			return
		}
		for _, p := range r.Pools {
			if !strings.Contains(pool, p) || !ipam.IsName(p) {
				t.Fatalf("pool %q not from %q", p, pool)
			}
		}
		for _, a := range r.Addresses {
			if !strings.Contains(address, a.String()) && !strings.Contains(strings.ToLower(address), a.String()) && a.Zone() == "" {
				// netip canonicalises (e.g. IPv6 zero compression): it must
				// at least reparse to itself.
				if a.String() == "" {
					t.Fatalf("empty address from %q", address)
				}
			}
		}
		if r.AllowIPChange != (allow == "true") {
			t.Fatalf("allow-ip-change %q read as %v", allow, r.AllowIPChange)
		}
	})
}

// FuzzTranslate: any words of other implementations are read or refused
// with the word's name; nothing panics, the Service's own map is never
// written, and what is read as this project's request came from the words.
func FuzzTranslate(f *testing.F) {
	cfg, err := ipam.ParseConfig([]byte(planConfig))
	if err != nil {
		f.Fatal(err)
	}
	f.Add("172.16.35.201", "dc-link", `["172.16.35.201"]`, "", "")
	f.Add("172.16.35.201,172.16.35.202", "", "", "172.16.35.203", "true")
	f.Add(" , ", "[", `["a",`, "x", "")
	f.Add("", `["dc-link","pay"]`, "", "10.20.0.5", "")
	f.Fuzz(func(t *testing.T, ips, pools, calico, lbIP, private string) {
		ann := map[string]string{}
		for k, v := range map[string]string{neighbours.AnnotationMetalLBIPs: ips, neighbours.AnnotationCalicoPools: pools, neighbours.AnnotationCalicoIPs: calico, ccm.AnnotationPrivate: private} {
			if v != "" {
				ann[k] = v
			}
		}
		before := len(ann)
		tr, err := Translate(cfg, "payments", ann, lbIP)
		if len(ann) != before {
			t.Fatalf("the Service's annotations were written: %v", ann)
		}
		if err != nil {
			if !(strings.HasPrefix(err.Error(), "annotation ") || strings.HasPrefix(err.Error(), "field spec.")) || len(err.Error()) > 2000 {
				t.Fatalf("unclear or unbounded error: %.300q", err.Error())
			}
			return
		}
		for _, p := range strings.Split(tr.Annotations[AnnotationPool], ",") {
			if _, ok := cfg.Pool(p); p != "" && !ok {
				t.Fatalf("pool %q read, which the pool file does not have", p)
			}
		}
		if v := tr.Annotations[AnnotationAddress]; v != "" && !strings.Contains(ips+calico+lbIP, strings.Split(v, ",")[0]) {
			t.Fatalf("address %q not from the words", v)
		}
	})
}
