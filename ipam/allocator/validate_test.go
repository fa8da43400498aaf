package allocator

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/emulator"
)

func TestValidateID(t *testing.T) {
	r := refs{}
	e, a := allocEnv(t, r)
	ctx := context.Background()
	edge, pay := e.PNs["edge"].ID, e.PNs["pay"].ID
	free, _ := e.Srv.AddIP(edge, mustAddr("10.10.0.3"), []string{"byo"}, nil)
	attached, _ := e.Srv.AddIP(edge, mustAddr("10.10.0.4"), nil, &emulator.Resource{Type: "instance_server", ID: "srv-1", Name: "vm-1"})
	payOnly, _ := e.Srv.AddIP(pay, mustAddr("10.20.0.9"), nil, nil)
	nodes, _ := e.Srv.AddIP(e.PNs["nodes"].ID, mustAddr("172.16.0.9"), nil, nil)
	theirs, _ := e.Srv.AddIP(edge, mustAddr("10.10.0.5"), ipam.Entry{Cluster: "test", Pool: "small", Service: svc("web", "other")}.Tags(), nil)
	otherCluster, _ := e.Srv.AddIP(pay, mustAddr("10.20.0.10"), ipam.Entry{Cluster: "staging", Pool: "payments", Service: svc("payments", "api")}.Tags(), nil)
	mine, _ := e.Srv.AddIP(pay, mustAddr("10.20.0.11"), ipam.Entry{Cluster: "test", Pool: "payments", Service: svc("payments", "api")}.Tags(), nil)
	refd, _ := e.Srv.AddIP(pay, mustAddr("10.20.0.12"), nil, nil)
	r[refd] = svc("payments", "billing")

	tests := []struct {
		name string
		id   string
		svc  string
		want []string // empty: valid
		byo  bool
	}{
		{"valid", free, "web/api", nil, true},
		{"valid in a restricted pool", payOnly, "payments/api", nil, true},
		{"our own reservation of this Service", mine, "payments/api", nil, false},
		{"missing", "00000000-0000-4000-8000-000000000000", "web/api", []string{"does not exist in region fr-par"}, false},
		{"attached", attached, "web/api", []string{"attached to instance_server vm-1"}, false},
		{"pool not allowed for namespace", payOnly, "web/api", []string{"not on the Private Network of a pool namespace web may use (auto, ranged, manual, drained, small)"}, false},
		{"no pool on that PN", nodes, "web/api", []string{"not on the Private Network of a pool"}, false},
		{"tagged to another Service", theirs, "web/api", []string{"reserved for Service web/other of cluster test"}, false},
		{"tagged by another cluster", otherCluster, "payments/api", []string{"cluster staging"}, false},
		{"referenced by another Service", refd, "payments/api", []string{"already used by Service payments/billing"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e.Srv.ResetCounts()
			ns, name, _ := strings.Cut(tt.svc, "/")
			res, err := a.ValidateID(ctx, ipam.IDRequest{ID: tt.id, Service: svc(ns, name)})
			if got := e.Calls(countedOps...); got != "ListIPs=0 BookIP=0 UpdateIP=0 GetIP=1 ReleaseIP=0" {
				t.Errorf("calls: %s", got)
			}
			if len(tt.want) > 0 {
				wantRefusal(t, err, "", tt.want...)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if res.ID != tt.id || res.BringYourOwn != tt.byo || !res.Address.IsValid() {
				t.Fatalf("reservation = %+v", res)
			}
		})
	}
}

// heldBy is Claims whose every ID is held by one Service.
type heldBy types.NamespacedName

func (h heldBy) Claim(_ context.Context, id string, s types.NamespacedName) error {
	if s != types.NamespacedName(h) {
		return &ipam.Error{Reason: ipam.ReasonIDNotUsable, Message: fmt.Sprintf("IPAM IP %s is already used by Service %s", id, types.NamespacedName(h))}
	}
	return nil
}

func (h heldBy) ClaimedBy(context.Context, string) (types.NamespacedName, bool, error) {
	return types.NamespacedName(h), true, nil
}

// Review finding: helm --force or an Argo CD replace of a bring-your-own
// Service. Its claim names it, and the ID is still attached to the Load
// Balancer of its previous incarnation, which the CCM is tearing down: a
// retryable "still held", as for a pool's reservation, not a hard denial.
// Another Service's LB, or any other resource, stays a hard denial.
func TestValidateIDWhilePreviousLoadBalancerHoldsIt(t *testing.T) {
	e, a := allocEnv(t, refs{})
	a.claims = heldBy(svc("web", "api"))
	ctx := context.Background()
	edge := e.PNs["edge"].ID
	lb, _ := e.Srv.AddIP(edge, mustAddr("10.10.0.3"), []string{"byo"}, &emulator.Resource{Type: "lb_server", ID: "lb-old", Name: "uid-old"})
	vm, _ := e.Srv.AddIP(edge, mustAddr("10.10.0.4"), []string{"byo"}, &emulator.Resource{Type: "instance_server", ID: "srv-1", Name: "vm-1"})

	live := a.refs
	beingDeleted(a, svc("web", "api"))
	_, err := a.ValidateID(ctx, ipam.IDRequest{ID: lb, Service: svc("web", "api")})
	wantRefusal(t, err, ipam.ReasonStillHeld, "still held by the Load Balancer of the previous web/api", "retry in a moment")
	// Gone: the re-create takes its claim again while Scaleway is still
	// deleting the previous Load Balancer.
	a.refs = live
	if r, err := a.ValidateID(ctx, ipam.IDRequest{ID: lb, Service: svc("web", "api")}); err != nil || r.ID != lb || !r.BringYourOwn {
		t.Fatalf("re-create after the previous Service is gone: %+v %v", r, err)
	}
	_, err = a.ValidateID(ctx, ipam.IDRequest{ID: lb, Service: svc("web", "other")})
	wantRefusal(t, err, ipam.ReasonIDNotUsable, "attached to lb_server")
	_, err = a.ValidateID(ctx, ipam.IDRequest{ID: vm, Service: svc("web", "api")})
	wantRefusal(t, err, ipam.ReasonIDNotUsable, "attached to instance_server vm-1")
}
