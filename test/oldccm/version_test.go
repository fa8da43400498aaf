package oldccm

import (
	"context"
	"net/netip"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestCCMBeforeV036AttachesWithDHCP: the CCM before v0.36.0 has no
// private-ip-ids. A Service naming reserved IP X gets a Load Balancer on
// both networks with addresses IPAM chose, X stays booked and attached to
// nothing, and the status shows the DHCP addresses, not X's: what a cluster
// with such a CCM looks like to the convergence monitor. Once upgraded, the
// next sync moves the pool's network to X.
func TestCCMBeforeV036AttachesWithDHCP(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	x, err := w.emu.AddIP(w.pool.ID, netip.MustParseAddr("172.16.35.10"), []string{"scw-lb-ipam"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "api", UID: "uid-1", Annotations: map[string]string{
			annotationPrivate: "true", annotationPNIDs: w.nodes.ID + "," + w.pool.ID, annotationPrivateIPIDs: x,
		}},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Port: 443}}},
	}
	if err := w.kube.Create(ctx, svc); err != nil {
		t.Fatal(err)
	}

	from := len(w.emu.Requests())
	w.ccm.Sync(ctx)
	// No IPAM lookup of the IDs: the only ListIPs is the status's.
	if calls, want := w.ops(from), []string{"ListLBs", "CreateLB", "ListLBPrivateNetworks", "AttachPrivateNetwork", "AttachPrivateNetwork", "ListIPs"}; !slices.Equal(calls, want) {
		t.Fatalf("calls %v, want %v", calls, want)
	}
	lbs := w.emu.LBs()
	if len(lbs) != 1 {
		t.Fatalf("load balancers %+v", lbs)
	}
	lb := lbs[0]
	dhcp := lb.PrivateNetworks[w.pool.ID]
	if dhcp == "" || dhcp == x || lb.PrivateNetworks[w.nodes.ID] == "" {
		t.Fatalf("attachments %v: want a DHCP IP on each network, not %s", lb.PrivateNetworks, x)
	}
	if ip, ok := w.emu.IP(x); !ok || ip.Resource != nil {
		t.Fatalf("X: booked %v, attached to %+v; want booked and attached to nothing", ok, ip.Resource)
	}
	ip, _ := w.emu.IP(dhcp)
	if ip.Resource == nil || ip.Resource.ID != lb.ID || string(ip.Resource.Type) != "lb_server" {
		t.Fatalf("IPAM shows the DHCP IP %s attached to %+v, want lb_server %s", dhcp, ip.Resource, lb.ID)
	}
	var ingress []string
	for _, in := range w.get(t, "api").Status.LoadBalancer.Ingress {
		ingress = append(ingress, in.IP)
	}
	if len(ingress) != 2 || !slices.Contains(ingress, addrOf(ip.Address.String())) || slices.Contains(ingress, "172.16.35.10") {
		t.Fatalf("ingress %v: want the two DHCP addresses (%s on the pool's network), not X's 172.16.35.10", ingress, ip.Address)
	}

	// A later sync (its own annotation changed the Service) keeps the
	// networks as they are: that CCM compares network IDs only.
	from = len(w.emu.Requests())
	w.ccm.Sync(ctx)
	for _, call := range w.ops(from) {
		if !strings.HasPrefix(call, "Get") && !strings.HasPrefix(call, "List") {
			t.Fatalf("the old CCM's second pass changed the Load Balancer: %v", w.ops(from))
		}
	}
}

// addrOf is the address of an IPAM prefix ("172.16.35.2/22").
func addrOf(prefix string) string {
	a, _, _ := strings.Cut(prefix, "/")
	return a
}
