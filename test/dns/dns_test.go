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

	"github.com/scw-lb-ipam/scw-lb-ipam/neighbours"
	"github.com/scw-lb-ipam/scw-lb-ipam/request"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/fixtures"
)

// asked is a Service that asks external-dns for a name, NAME.dc.example.,
// under prefix.
type asked struct {
	client.ObjectKey
	prefix string
}

func (a asked) host() string { return a.Name + "." + zone }

// The Services the scenarios publish: api under the prefix most manifests
// use, web under external-dns v0.22's.
var (
	api = asked{client.ObjectKey{Namespace: namespace, Name: "api"}, neighbours.ExternalDNSPrefixLegacy}
	web = asked{client.ObjectKey{Namespace: namespace, Name: "web"}, neighbours.ExternalDNSPrefix}
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
// same after a re-create within retention, and is gone with the Service;
// the same under external-dns v0.22's own prefix; and the convergence
// monitor says when DNS points at an address the CCM has not attached.
func TestDNSTarget(t *testing.T) {
	w := startWorld(t, true)
	var addr string
	steps := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"ReservedAddressOnly", func(t *testing.T) {
			addr, _ = w.publish(t, api)
			w.targets(t, api, addr)
			w.resolves(t, api, addr)
		}},
		{"RecreateKeepsAddress", func(t *testing.T) {
			w.remove(t, api)
			again, _ := w.publish(t, api)
			if again != addr {
				t.Fatalf("the re-created Service got %s, was %s: a re-create within retention keeps the address", again, addr)
			}
			w.resolves(t, api, addr)
		}},
		{"DeleteRemovesName", func(t *testing.T) {
			w.remove(t, api)
			w.resolves(t, api)
		}},
		{"PublicNameKeepsPublicIP", w.publicName},
		{"NewPrefix", w.newPrefix},
		{"UnattachedAddressEventSaysDNS", w.unattached},
	}
	for _, s := range steps {
		if !t.Run(s.name, s.run) {
			return // the next step starts from this one's end
		}
	}
}

// publicName: a public Load Balancer holding a reservation (the CCM
// attaches it, but its status lists the public IP only) keeps its name at
// that public IP: the webhook writes no target that would move the name to
// the private address.
func (w *world) publicName(t *testing.T) {
	pub := asked{client.ObjectKey{Namespace: namespace, Name: "public"}, neighbours.ExternalDNSPrefixLegacy}
	svc := fixtures.Service(pub.Namespace, pub.Name, map[string]string{
		request.AnnotationPool:  "dc-link",
		pub.prefix + "hostname": pub.host(),
	})
	if err := w.Kube.Create(context.Background(), svc); err != nil {
		t.Fatalf("creating %s: %v", pub, err)
	}
	var public string
	fixtures.EventuallySays(t, attachWait, poll, pub.String()+"'s public IP in its status", func() (bool, string) {
		cur := &corev1.Service{}
		if err := w.Kube.Get(context.Background(), pub.ObjectKey, cur); err != nil {
			return false, err.Error()
		}
		var ips []string
		for _, in := range cur.Status.LoadBalancer.Ingress {
			ips = append(ips, in.IP)
		}
		if len(ips) == 1 {
			public = ips[0]
		}
		return public != "" && cur.Annotations[request.AnnotationAddresses] != "", fmt.Sprintf("reserved %q, status ingress %v", cur.Annotations[request.AnnotationAddresses], ips)
	})
	if reserved := w.reserved(t, pub); reserved == public {
		t.Fatalf("the public Load Balancer's status lists its reserved address %s", reserved)
	}
	w.targets(t, pub, "")
	w.resolves(t, pub, public)
	w.remove(t, pub)
	w.resolves(t, pub)
}

// TestDNSTargetOff is the negative control: with dnsTarget: false the
// webhook writes no target and external-dns publishes every address of the
// status, the DHCP one included.
func TestDNSTargetOff(t *testing.T) {
	w := startWorld(t, false)
	addr, dhcp := w.publish(t, api)
	w.targets(t, api, "")
	w.resolves(t, api, addr, dhcp)
}

// publish creates the Service and waits until its Load Balancer has both
// its addresses in the status: the reserved one, which it returns with the
// DHCP one on the nodes' network. Without the two, the scenarios could not
// tell a target from the status.
func (w *world) publish(t *testing.T, a asked) (addr, dhcp string) {
	t.Helper()
	w.create(t, a)
	nodes := netip.MustParsePrefix("172.16.0.0/22")
	var ips []string
	fixtures.EventuallySays(t, attachWait, poll, a.String()+"'s reserved and DHCP addresses in its status", func() (bool, string) {
		cur := &corev1.Service{}
		if err := w.Kube.Get(context.Background(), a.ObjectKey, cur); err != nil {
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
	t.Logf("%s: reserved %s, DHCP %s, status ingress %v", a, addr, dhcp, ips)
	return addr, dhcp
}

// create creates the Service, a private one from pool dc-link asking
// external-dns for its name.
func (w *world) create(t *testing.T, a asked) {
	t.Helper()
	svc := fixtures.PrivateService(a.Namespace, a.Name, map[string]string{
		request.AnnotationPool: "dc-link",
		a.prefix + "hostname":  a.host(),
	})
	if err := w.Kube.Create(context.Background(), svc); err != nil {
		t.Fatalf("creating %s: %v", a, err)
	}
}

// reserved is the address the webhook reserved for the Service.
func (w *world) reserved(t *testing.T, a asked) string {
	t.Helper()
	cur := &corev1.Service{}
	if err := w.Kube.Get(context.Background(), a.ObjectKey, cur); err != nil {
		t.Fatal(err)
	}
	addr := cur.Annotations[request.AnnotationAddresses]
	if addr == "" {
		t.Fatalf("%s was admitted without a reservation: annotations %v", a, cur.Annotations)
	}
	return addr
}

// targets checks the target annotation the Service carries under its
// hostname's prefix: want, or none when want is empty.
func (w *world) targets(t *testing.T, a asked, want string) {
	t.Helper()
	cur := &corev1.Service{}
	if err := w.Kube.Get(context.Background(), a.ObjectKey, cur); err != nil {
		t.Fatal(err)
	}
	key := a.prefix + "target"
	if got, set := cur.Annotations[key]; got != want || set != (want != "") {
		t.Fatalf("%s: %s is %q (set: %t), want %q", a, key, got, set, want)
	}
}

// resolves waits until named answers host with exactly want (sorted; none:
// the name does not exist), then checks the answer holds over a few of
// external-dns's syncs.
func (w *world) resolves(t *testing.T, a asked, want ...string) {
	t.Helper()
	slices.Sort(want)
	answer := func() (bool, string) {
		for _, p := range w.externalDNS {
			if !p.running() {
				t.Fatalf("%s exited\n%s", p.name, p.logTail())
			}
		}
		got, err := w.named.lookup(a.host())
		if err != nil {
			return false, err.Error()
		}
		return slices.Equal(got, want), fmt.Sprintf("%s → %v", a.host(), got)
	}
	what := fmt.Sprintf("%s to resolve to %v", a.host(), want)
	if !eventually(syncWait, answer) {
		_, last := answer()
		t.Fatalf("timed out after %s waiting for %s; last answer: %s\n%s", syncWait, what, last, w.logTails())
	}
	for end := time.Now().Add(held); time.Now().Before(end); time.Sleep(poll) {
		if ok, last := answer(); !ok {
			t.Fatalf("%s, then %s within %s\n%s", what, last, held, w.logTails())
		}
	}
	t.Logf("%s → %s", a.host(), strings.Join(want, ", "))
}

// remove deletes the Service and waits until it is gone: its Load
// Balancer torn down by the CCM.
func (w *world) remove(t *testing.T, a asked) {
	t.Helper()
	svc := &corev1.Service{}
	svc.Namespace, svc.Name = a.Namespace, a.Name
	if err := w.Kube.Delete(context.Background(), svc); err != nil {
		t.Fatalf("deleting %s: %v", a, err)
	}
	fixtures.EventuallySays(t, attachWait, poll, a.String()+" gone", func() (bool, string) {
		err := w.Kube.Get(context.Background(), a.ObjectKey, &corev1.Service{})
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
