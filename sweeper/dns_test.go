package sweeper

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/scw-lb-ipam/scw-lb-ipam/neighbours"
)

// A Service whose name external-dns publishes at its reserved address (the
// target the webhook wrote) gets an Event that says DNS points at the
// address the CCM has not attached; one that asks for no name, or whose
// target is the user's, gets the same Event without that line, and so does
// one whose address is attached but missing from the status (it serves).
func TestEventSaysDNSPointsAtTheUnattachedAddress(t *testing.T) {
	const dnsSays = "DNS points at "
	for _, tc := range []struct {
		name    string
		ann     func(addr string) map[string]string
		attach  bool
		wantDNS bool
	}{
		{"TargetWrittenLegacyPrefix", func(addr string) map[string]string {
			return map[string]string{neighbours.ExternalDNSPrefixLegacy + "hostname": "api.dc.example.", neighbours.ExternalDNSPrefixLegacy + "target": addr}
		}, false, true},
		{"TargetWrittenNewPrefix", func(addr string) map[string]string {
			return map[string]string{neighbours.ExternalDNSPrefix + "hostname": "api.dc.example.", neighbours.ExternalDNSPrefix + "target": addr}
		}, false, true},
		{"NoName", func(string) map[string]string { return nil }, false, false},
		{"UsersTarget", func(string) map[string]string {
			return map[string]string{neighbours.ExternalDNSPrefixLegacy + "hostname": "api.dc.example.", neighbours.ExternalDNSPrefixLegacy + "target": "192.0.2.10"}
		}, false, false},
		{"TargetUnderAnotherPrefix", func(addr string) map[string]string {
			return map[string]string{neighbours.ExternalDNSPrefix + "hostname": "api.dc.example.", neighbours.ExternalDNSPrefixLegacy + "target": addr}
		}, false, false},
		{"AttachedNotInStatus", func(addr string) map[string]string {
			return map[string]string{neighbours.ExternalDNSPrefixLegacy + "hostname": "api.dc.example.", neighbours.ExternalDNSPrefixLegacy + "target": addr}
		}, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t)
			s, ev := w.monitored()
			r := w.book("dc-link", "payments", "api")
			svc := w.admitted("api", r)
			w.edit(svc, func(s *corev1.Service) {
				for k, v := range tc.ann(r.Address.String()) {
					s.Annotations[k] = v
				}
			})
			w.serve(svc, "lb-1", tc.attach)
			if tc.attach {
				w.edit(svc, func(s *corev1.Service) { s.Status.LoadBalancer.Ingress = nil })
			}
			w.cycles(s, int(testGrace/time.Minute)+2)
			got := notApplied(ev)
			if len(got) != 1 {
				t.Fatalf("%d IPNotApplied Events, want 1: %v", len(got), ev.list)
			}
			want := dnsSays + r.Address.String() + ", which the CCM has not attached"
			if has := strings.Contains(got[0], want); has != tc.wantDNS {
				t.Fatalf("Event says %q: %t, want %t:\n%s", want, has, tc.wantDNS, got[0])
			}
			if !tc.wantDNS && strings.Contains(got[0], dnsSays) {
				t.Fatalf("Event speaks of DNS:\n%s", got[0])
			}
		})
	}
}
