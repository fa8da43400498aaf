package clients

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	ipamapi "github.com/scaleway/scaleway-sdk-go/api/ipam/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/scw-lb-ipam/scw-lb-ipam/ccm"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
	"github.com/scw-lb-ipam/scw-lb-ipam/neighbours"
	"github.com/scw-lb-ipam/scw-lb-ipam/request"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/emulator"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/fixtures"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/testenv"
)

// ccmSettle is how long a re-apply is given to make the CCM act: its
// informer hands it the changed Service at once and a sync takes a dozen
// calls; the rest is room for a loaded machine.
const ccmSettle = 3 * time.Second

// lbState is what a Service's Load Balancer got from its first admission:
// what every later step must leave as it is.
type lbState struct {
	svc       client.ObjectKey
	uid       string
	id, addr  string
	poolPN    string // the Private Network of the reservation
	lb        string // the Load Balancer's ID, without its zone
	tags      []string
	ledger    bool // the IP carries our tags (a pool's), not bring-your-own
	attachLog int  // the emulator's request log once the CCM attached it
}

// get reads a Service; nil when it does not exist (or cannot be read).
func (cp *controlPlane) get(svc client.ObjectKey) *corev1.Service {
	out := &corev1.Service{}
	if err := cp.Kube.Get(context.Background(), svc, out); err != nil {
		return nil
	}
	return out
}

// poll is how often the scenarios look again at what they wait for.
const poll = 100 * time.Millisecond

// attached reports whether the IPAM IP id is attached to the Load Balancer
// the Service is annotated with and the CCM wrote its address in
// the status: the end of the CCM's sync. It also returns the LB's ID.
func (cp *controlPlane) attached(svc *corev1.Service, id string) (bool, string, string) {
	_, lb, _ := strings.Cut(svc.Annotations[ccm.AnnotationLoadBalancerID], "/")
	ip, ok := cp.Emu.IP(id)
	switch {
	case !ok:
		return false, lb, fmt.Sprintf("IPAM ID %s does not exist", id)
	case lb == "":
		return false, lb, "the Service has no Load Balancer yet"
	case ip.Resource == nil || ip.Resource.ID != lb || string(ip.Resource.Type) != "lb_server":
		return false, lb, fmt.Sprintf("IPAM ID %s is attached to %s, not to the Service's Load Balancer %s", id, resource(ip.Resource), lb)
	}
	addr := addressOf(ip)
	if !slices.ContainsFunc(svc.Status.LoadBalancer.Ingress, func(in corev1.LoadBalancerIngress) bool { return in.IP == addr }) {
		return false, lb, fmt.Sprintf("status ingress %v lacks %s", svc.Status.LoadBalancer.Ingress, addr)
	}
	return true, lb, ""
}

// firstAdmission waits until the Service's reservation is attached to its
// Load Balancer and, for a pool's, the sweeper has back-filled its uid (a
// re-create finds it by it), and returns that state.
func (cp *controlPlane) firstAdmission(t *testing.T, svc client.ObjectKey, poolPN string, ledger bool) *lbState {
	t.Helper()
	st := &lbState{svc: svc, poolPN: poolPN, ledger: ledger}
	fixtures.EventuallySays(t, 30*time.Second, poll, "the first admission of "+svc.String()+" attached by the CCM", func() (bool, string) {
		cur := cp.get(svc)
		if cur == nil {
			return false, "no Service"
		}
		st.uid, st.id, st.addr = string(cur.UID), cur.Annotations[ccm.AnnotationPrivateIPIDs], cur.Annotations[request.AnnotationAddresses]
		if st.id == "" || strings.Contains(st.id, ",") {
			return false, fmt.Sprintf("private-ip-ids %q", st.id)
		}
		ok, lb, why := cp.attached(cur, st.id)
		st.lb = lb
		return ok, why
	})
	if ip, _ := cp.Emu.IP(st.id); addressOf(ip) != st.addr || cp.networkOf(ip) != poolPN {
		t.Fatalf("%s: IPAM ID %s is %s on Private Network %s; the Service says %s, and the pool's network is %s", svc, st.id, addressOf(ip), cp.networkOf(ip), st.addr, poolPN)
	}
	if ledger {
		cp.backfilled(t, st)
	}
	ip, _ := cp.Emu.IP(st.id)
	st.tags, st.attachLog = ip.Tags, len(cp.Emu.Requests())
	t.Logf("%s: %s (IPAM ID %s) on Load Balancer %s", svc, st.addr, st.id, st.lb)
	return st
}

// backfilled waits until the sweeper has written the Service's uid on its
// reservation: a re-create takes back the reservation its previous
// incarnation used, which it knows by that tag.
func (cp *controlPlane) backfilled(t *testing.T, st *lbState) {
	t.Helper()
	fixtures.EventuallySays(t, 15*time.Second, poll, "the uid of "+st.svc.String()+" back-filled on "+st.id, func() (bool, string) {
		ip, _ := cp.Emu.IP(st.id)
		e, _ := ipam.ParseEntry(ip.Tags)
		return e.UID == st.uid, fmt.Sprintf("tags %v", ip.Tags)
	})
}

// reapplied checks, once the CCM had time to act, that a re-apply
// of the unchanged manifest left the Load Balancer alone: the same
// address, IPAM IDs and Load Balancer, pn-ids still listing the
// reservation's network, no attach or detach by the CCM since the first
// attach, the IP's tags as they were.
func (cp *controlPlane) reapplied(t *testing.T, step string, st *lbState) {
	t.Helper()
	time.Sleep(ccmSettle)
	cur := cp.get(st.svc)
	if cur == nil {
		t.Errorf("after %s: %s is gone", step, st.svc)
		return
	}
	cp.sameReservation(t, step, st, cur)
	if string(cur.UID) != st.uid {
		t.Errorf("after %s: %s was re-created (uid %s, was %s): a re-apply must update it", step, st.svc, cur.UID, st.uid)
	}
	if _, lb, _ := strings.Cut(cur.Annotations[ccm.AnnotationLoadBalancerID], "/"); lb != st.lb {
		t.Errorf("after %s: the Service's Load Balancer is %q, was %s", step, lb, st.lb)
	}
	if calls := cp.ccmAttachCalls(st.attachLog, st.lb); len(calls) > 0 {
		t.Errorf("after %s: the CCM re-synced the Load Balancer %s of an unchanged manifest: %s", step, st.lb, strings.Join(calls, "; "))
	}
	ip, ok := cp.Emu.IP(st.id)
	switch {
	case !ok:
		t.Errorf("after %s: IPAM ID %s was released", step, st.id)
	case ip.Resource == nil || ip.Resource.ID != st.lb:
		t.Errorf("after %s: IPAM ID %s (%s) is attached to %s, not to the Load Balancer %s: the address is gone from the LB", step, st.id, st.addr, resource(ip.Resource), st.lb)
	case !ipam.SameTags(ip.Tags, st.tags):
		t.Errorf("after %s: the tags of %s changed from %v to %v", step, st.id, st.tags, ip.Tags)
	}
}

// sameReservation checks the Service's annotations against the first
// admission's: the same address and IPAM IDs, and pn-ids still listing the
// reservation's network (the CCM detaches every network not listed).
func (cp *controlPlane) sameReservation(t *testing.T, step string, st *lbState, cur *corev1.Service) {
	t.Helper()
	for _, problem := range fixtures.Unkept(cur, st.addr, st.id, st.poolPN) {
		t.Errorf("after %s: %s", step, problem)
	}
	// external-dns's target is kept as pn-ids is, where the manifest asks
	// for a name (the kubectl scenarios' does; dnsTargeted).
	if _, asks := cur.Annotations[dnsHostname]; asks && cur.Annotations[dnsTarget] != st.addr {
		t.Errorf("after %s: %s %q, want the reserved address %s: external-dns would publish the DHCP address too", step, dnsTarget, cur.Annotations[dnsTarget], st.addr)
	}
}

// The external-dns annotations of the kubectl scenarios' manifest.
const (
	dnsHostname = neighbours.ExternalDNSPrefixLegacy + "hostname"
	dnsTarget   = neighbours.ExternalDNSPrefixLegacy + "target"
)

// dnsTargeted fails t unless the first admission gave the Service the
// reserved address as external-dns's target.
func (cp *controlPlane) dnsTargeted(t *testing.T, st *lbState) {
	t.Helper()
	if got := cp.get(st.svc).Annotations[dnsTarget]; got != st.addr {
		t.Fatalf("%s: %s %q after the first admission, want the reserved address %s", st.svc, dnsTarget, got, st.addr)
	}
}

// recreated waits until the Service, deleted and created again by step, is
// a new object whose new Load Balancer is attached to the old reservation,
// and checks its annotations; the IP keeps its cluster, pool and Service
// tags (its uid tag moves to the new object with the back-fill). It
// returns the new state, the baseline of later steps.
func (cp *controlPlane) recreated(t *testing.T, step string, old *lbState) *lbState {
	t.Helper()
	st := *old
	var cur *corev1.Service
	fixtures.EventuallySays(t, cp.recreate, poll, fmt.Sprintf("after %s: the new %s's Load Balancer attached to %s (IPAM ID %s)", step, old.svc, old.addr, old.id), func() (bool, string) {
		if cur = cp.get(old.svc); cur == nil {
			return false, "no Service"
		}
		if string(cur.UID) == old.uid {
			return false, "still the old Service (uid " + old.uid + ")"
		}
		if got := cur.Annotations[ccm.AnnotationPrivateIPIDs]; got != old.id {
			// Nothing the CCM does changes it: fail now, with the reason.
			return true, ""
		}
		ok, lb, why := cp.attached(cur, old.id)
		st.lb = lb
		return ok, why
	})
	cp.sameReservation(t, step, old, cur)
	if t.Failed() {
		t.FailNow()
	}
	if st.lb == old.lb {
		t.Errorf("after %s: the new Service is on the old Load Balancer %s", step, st.lb)
	}
	st.uid = string(cur.UID)
	if st.ledger {
		cp.backfilled(t, &st)
		ip, _ := cp.Emu.IP(st.id)
		was, _ := ipam.ParseEntry(old.tags)
		now, _ := ipam.ParseEntry(ip.Tags)
		if now.Cluster != was.Cluster || now.Pool != was.Pool || now.Service != was.Service {
			t.Errorf("after %s: the ledger of %s went from %v to %v", step, st.id, old.tags, ip.Tags)
		}
	}
	ip, _ := cp.Emu.IP(st.id)
	st.tags, st.attachLog = ip.Tags, len(cp.Emu.Requests())
	t.Logf("after %s: %s (IPAM ID %s) on the new Load Balancer %s", step, st.addr, st.id, st.lb)
	return &st
}

// ccmAttachCalls are the CCM's attach and detach calls on Load
// Balancer lb since entry from of the emulator's request log.
func (cp *controlPlane) ccmAttachCalls(from int, lb string) []string {
	var out []string
	reqs := cp.Emu.Requests()
	for _, r := range reqs[min(from, len(reqs)):] {
		if !testenv.IsCCM(r) || !strings.Contains(r.Path, lb) {
			continue
		}
		if r.Op == emulator.OpAttachLBPrivateNetwork || r.Op == emulator.OpDetachLBPrivateNetwork {
			out = append(out, fmt.Sprintf("%s %s %s → %d", r.Time.Format("15:04:05.000"), r.Op, r.Path, r.Status))
		}
	}
	return out
}

func addressOf(ip ipamapi.IP) string {
	if ip.Address.IP == nil {
		return ""
	}
	return ip.Address.IP.String()
}

// networkOf is the Private Network of an IP, found by its subnet: IPAM
// names only the subnet of an IP.
func (cp *controlPlane) networkOf(ip ipamapi.IP) string {
	if ip.Source == nil || ip.Source.SubnetID == nil {
		return ""
	}
	for _, pn := range cp.PNs {
		for _, sn := range pn.Subnets {
			if sn.ID == *ip.Source.SubnetID {
				return pn.ID
			}
		}
	}
	return ""
}

func resource(r *ipamapi.Resource) string {
	if r == nil {
		return "nothing"
	}
	return fmt.Sprintf("%s %s", r.Type, r.ID)
}
