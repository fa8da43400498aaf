package request

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
)

// TestOneIPPerNetwork: the rule is checked on validated IDs, with the IDs
// named, and left to the plan for pools (their networks are known before
// booking).
func TestOneIPPerNetwork(t *testing.T) {
	cfg := &ipam.Config{ClusterPrivateNetworkID: "nodes"}
	a := &ipam.Reservation{ID: "id-a", PrivateNetworkID: "dc"}
	b := &ipam.Reservation{ID: "id-b", PrivateNetworkID: "edge"}
	c := &ipam.Reservation{ID: "id-c", PrivateNetworkID: "dc"}
	for name, tt := range map[string]struct {
		plan *Plan
		rs   []*ipam.Reservation
		want string
	}{
		"IDs on distinct networks":   {&Plan{IDs: []string{"id-a", "id-b"}}, []*ipam.Reservation{a, b}, ""},
		"IDs sharing a network":      {&Plan{IDs: []string{"id-a", "id-b", "id-c"}}, []*ipam.Reservation{a, b, c}, "IPAM IDs id-a and id-c are both on Private Network dc, and a Load Balancer takes one IP per Private Network; keep one"},
		"pools: checked by the plan": {&Plan{Reserve: []ipam.Request{{}, {}}}, []*ipam.Reservation{a, c}, ""},
	} {
		t.Run(name, func(t *testing.T) {
			err := CheckReserved(cfg, Ask{}, tt.plan, tt.rs)
			if got := ""; err != nil {
				got = err.Error()
				if got != tt.want {
					t.Fatalf("CheckReserved = %q, want %q", got, tt.want)
				}
			} else if tt.want != "" {
				t.Fatalf("CheckReserved = nil, want %q", tt.want)
			}
		})
	}
	if i, j, ok := sharedNetwork(strings.Split("a,b,c,b,a", ",")); !ok || i != 1 || j != 3 {
		t.Fatalf("sharedNetwork = %d %d %v, want the first pair found going right: 1 3", i, j, ok)
	}
}

// portsService is a LoadBalancer Service with ports 443 and 80.
func portsService(ann map[string]string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "payments", Name: "api", Annotations: ann},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Port: 443}, {Port: 80}}},
	}
}

func TestPrivateNetworkID(t *testing.T) {
	for in, want := range map[string]string{"fr-par-1/abc": "abc", "abc": "abc"} {
		if got := PrivateNetworkID(in); got != want {
			t.Errorf("PrivateNetworkID(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestProxyProtocolGap(t *testing.T) {
	const v2 = "service.beta.kubernetes.io/scw-loadbalancer-proxy-protocol-v2"
	key, value, missing, ok := ProxyProtocolGap(portsService(map[string]string{v2: "443"}))
	if !ok || key != v2 || value != "443" || !slices.Equal(missing, []string{"80"}) {
		t.Fatalf("gap = %q %q %q %v", key, value, missing, ok)
	}
	for _, v := range []string{"*", "true", "false", "", "443,80", "nope"} {
		if _, _, _, ok := ProxyProtocolGap(portsService(map[string]string{v2: v})); ok {
			t.Errorf("%q: reported a gap", v)
		}
	}
}
