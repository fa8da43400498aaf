package dns

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/scw-lb-ipam/scw-lb-ipam/ccm"
	"github.com/scw-lb-ipam/scw-lb-ipam/request"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/fixtures"
)

// The Service the scenarios publish and the name it asks for.
var (
	api  = client.ObjectKey{Namespace: namespace, Name: "api"}
	host = "api." + zone
)

const (
	poll = 200 * time.Millisecond
	// attachWait bounds a Load Balancer's two attachments: the CCM's
	// retries of a re-created Service's attach, while its old Load
	// Balancer, deleted late, still holds the address, included.
	attachWait = 90 * time.Second
	// syncWait bounds external-dns's sync (every 2 s and on events);
	// held is how long a published answer must then stay as it is.
	syncWait = 30 * time.Second
	held     = 6 * time.Second
)

// TestDNSTarget: the name resolves to the reserved address only, the
// same after a re-create within retention, and is gone with the Service.
func TestDNSTarget(t *testing.T) {
	w := startWorld(t, true)
	var addr string
	steps := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"ReservedAddressOnly", func(t *testing.T) {
			addr, _ = w.publish(t)
			w.targets(t, addr)
			w.resolves(t, addr)
		}},
		{"RecreateKeepsAddress", func(t *testing.T) {
			w.remove(t)
			again, _ := w.publish(t)
			if again != addr {
				t.Fatalf("the re-created Service got %s, was %s: a re-create within retention keeps the address", again, addr)
			}
			w.resolves(t, addr)
		}},
		{"DeleteRemovesName", func(t *testing.T) {
			w.remove(t)
			w.resolves(t)
		}},
		{"UnattachedAddressEventSaysDNS", w.unattached},
	}
	for _, s := range steps {
		if !t.Run(s.name, s.run) {
			return // the next step starts from this one's end
		}
	}
}

// TestDNSTargetOff is the negative control: with dnsTarget: false the
// webhook writes no target and external-dns publishes every address of the
// status, the DHCP one included.
func TestDNSTargetOff(t *testing.T) {
	w := startWorld(t, false)
	addr, dhcp := w.publish(t)
	w.targets(t, "")
	w.resolves(t, addr, dhcp)
}

// publish creates the Service and waits until its Load Balancer has both
// its addresses in the status: the reserved one, which it returns with the
// DHCP one on the nodes' network. Without the two, the scenarios could not
// tell a target from the status.
func (w *world) publish(t *testing.T) (addr, dhcp string) {
	t.Helper()
	w.create(t)
	nodes := netip.MustParsePrefix("172.16.0.0/22")
	var ips []string
	fixtures.EventuallySays(t, attachWait, poll, api.String()+"'s reserved and DHCP addresses in its status", func() (bool, string) {
		cur := &corev1.Service{}
		if err := w.Kube.Get(context.Background(), api, cur); err != nil {
			return false, err.Error()
		}
		addr, dhcp, ips = cur.Annotations[request.AnnotationAddresses], "", nil
		for _, in := range cur.Status.LoadBalancer.Ingress {
			ips = append(ips, in.IP)
			if ip, err := netip.ParseAddr(in.IP); err == nil && nodes.Contains(ip) {
				dhcp = in.IP
			}
		}
		ok := addr != "" && dhcp != "" && len(ips) == 2 && slices.Contains(ips, addr)
		return ok, fmt.Sprintf("reserved %q, status ingress %v", addr, ips)
	})
	t.Logf("%s: reserved %s, DHCP %s, status ingress %v", api, addr, dhcp, ips)
	return addr, dhcp
}

// create creates the Service, a private one from pool dc-link asking
// external-dns for host.
func (w *world) create(t *testing.T) {
	t.Helper()
	svc := fixtures.PrivateService(api.Namespace, api.Name, map[string]string{
		request.AnnotationPool:                   "dc-link",
		ccm.ExternalDNSPrefixLegacy + "hostname": host,
	})
	if err := w.Kube.Create(context.Background(), svc); err != nil {
		t.Fatalf("creating %s: %v", api, err)
	}
}

// reserved is the address the webhook reserved for the Service.
func (w *world) reserved(t *testing.T) string {
	t.Helper()
	cur := &corev1.Service{}
	if err := w.Kube.Get(context.Background(), api, cur); err != nil {
		t.Fatal(err)
	}
	addr := cur.Annotations[request.AnnotationAddresses]
	if addr == "" {
		t.Fatalf("%s was admitted without a reservation: annotations %v", api, cur.Annotations)
	}
	return addr
}

// targets checks the target annotation the Service carries under its
// hostname's prefix: want, or none when want is empty.
func (w *world) targets(t *testing.T, want string) {
	t.Helper()
	cur := &corev1.Service{}
	if err := w.Kube.Get(context.Background(), api, cur); err != nil {
		t.Fatal(err)
	}
	key := ccm.ExternalDNSPrefixLegacy + "target"
	if got, set := cur.Annotations[key]; got != want || set != (want != "") {
		t.Fatalf("%s: %s is %q (set: %t), want %q", api, key, got, set, want)
	}
}

// resolves waits until named answers host with exactly want (sorted; none:
// the name does not exist), then checks the answer holds over a few of
// external-dns's syncs.
func (w *world) resolves(t *testing.T, want ...string) {
	t.Helper()
	slices.Sort(want)
	answer := func() (bool, string) {
		if !w.externalDNS.running() {
			t.Fatalf("external-dns exited\n%s", w.externalDNS.logTail())
		}
		got, err := w.named.lookup(host)
		if err != nil {
			return false, err.Error()
		}
		return slices.Equal(got, want), fmt.Sprintf("%s → %v", host, got)
	}
	what := fmt.Sprintf("%s to resolve to %v", host, want)
	if !eventually(syncWait, answer) {
		_, last := answer()
		t.Fatalf("timed out after %s waiting for %s; last answer: %s\n%s", syncWait, what, last, w.externalDNS.logTail())
	}
	for end := time.Now().Add(held); time.Now().Before(end); time.Sleep(poll) {
		if ok, last := answer(); !ok {
			t.Fatalf("%s, then %s within %s\n%s", what, last, held, w.externalDNS.logTail())
		}
	}
	t.Logf("%s → %s", host, strings.Join(want, ", "))
}

// remove deletes the Service and waits until it is gone: its Load
// Balancer torn down by the CCM.
func (w *world) remove(t *testing.T) {
	t.Helper()
	svc := &corev1.Service{}
	svc.Namespace, svc.Name = api.Namespace, api.Name
	if err := w.Kube.Delete(context.Background(), svc); err != nil {
		t.Fatalf("deleting %s: %v", api, err)
	}
	fixtures.EventuallySays(t, attachWait, poll, api.String()+" gone", func() (bool, string) {
		err := w.Kube.Get(context.Background(), api, &corev1.Service{})
		return apierrors.IsNotFound(err), fmt.Sprintf("get: %v", err)
	})
}

// eventually polls cond until it holds or timeout passes.
func eventually(timeout time.Duration, cond func() (bool, string)) bool {
	for end := time.Now().Add(timeout); time.Now().Before(end); time.Sleep(poll) {
		if ok, _ := cond(); ok {
			return true
		}
	}
	return false
}
