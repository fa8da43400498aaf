package integration

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	lbapi "github.com/scaleway/scaleway-sdk-go/api/lb/v1"
	"github.com/scaleway/scaleway-sdk-go/scw"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/scw-lb-ipam/scw-lb-ipam/ccm"
	"github.com/scw-lb-ipam/scw-lb-ipam/request"
	"github.com/scw-lb-ipam/scw-lb-ipam/sweeper"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/emulator"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/fixtures"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/localrun"
)

// TestStaleCopyLeaksALoadBalancer is what the chaos run's leak was, driven
// on the real CCM. A Service created while the CCM is down (its leader
// being replaced) has no finalizer yet, so a delete removes it at once, and
// the user creates it again. The CCM, whose Services watch is behind the
// apiserver (here held at the gate), syncs the copy it listed of the first
// one: its writes go by name with no UID precondition (the
// cloud-provider's finalizer and status patches, the CCM's
// annotateAndPatch), so the second Service gets the finalizer, the status
// and the ID of a Load Balancer named for the first. Had that CCM gone on,
// its next sync of the name would have deleted that Load Balancer (the
// service controller remembers the UID it synced); it is killed first, as
// the chaos run killed the CCM's leader. The next CCM reads the ID, adopts
// that Load Balancer, and at the Service's deletion finds it not named for
// the Service ("was renamed, not removing"), lets the finalizer go and
// leaves it, with the reserved IP attached, for ever. Nothing of ours
// writes in that chain. The product warns the Service while it lives
// (sweeper.EventReasonLoadBalancerNotNamedForService), reports the IP
// stranded once it is gone (scw_lb_ipam_sweeper_stranded), and
// docs/troubleshooting.md says how to clean up.
func TestStaleCopyLeaksALoadBalancer(t *testing.T) {
	scenario(t, func(t *testing.T) {
		ctx := context.Background()
		const ns, name = "payments", "stale-copy"
		path := "/api/v1/namespaces/" + ns + "/services/" + name
		s.CCM.Stop()
		// Whatever fails, later scenarios get a CCM that sees every change:
		// one holding a watch at the gate is replaced.
		held := false
		t.Cleanup(func() {
			if held {
				s.CCM.Stop()
			}
			s.CCM.Gate.Before(nil)
			if len(s.CCM.Processes()) == 0 {
				if err := s.CCM.Start(); err != nil {
					t.Error(err)
				}
			}
		})
		// Public, as the chaos run's Load Balancers are.
		if err := s.Kube.Create(ctx, fixtures.Service(ns, name, map[string]string{request.AnnotationPool: "general"})); err != nil {
			t.Fatal(err)
		}
		first := get(t, ns, name).UID
		var once sync.Once
		swapped := make(chan error, 1)
		s.CCM.Gate.Before(func(w http.ResponseWriter, r *http.Request) bool {
			switch {
			case r.URL.Path == "/api/v1/services" && r.URL.Query().Get("sendInitialEvents") == "true":
				// A streaming list is refused, as by an apiserver that does not
				// serve one: the CCM lists, then watches.
				http.Error(w, "streaming lists are not served here", http.StatusBadRequest)
				return true
			case r.URL.Path == "/api/v1/services" && r.URL.Query().Get("watch") == "true":
				// The watch after the list: held until the CCM is gone.
				<-r.Context().Done()
				return true
			case r.Method == http.MethodPatch && strings.TrimSuffix(r.URL.Path, "/status") == path:
				// The CCM's first write (the cloud-provider's finalizer
				// patch, through the status subresource).
				once.Do(func() { swapped <- replace(ctx, ns, name, first) })
			}
			return false
		})
		held = true
		if err := s.CCM.Start(); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-swapped:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(60 * time.Second):
			t.Fatal("the CCM wrote nothing to " + ns + "/" + name + " in 60 s")
		}
		// The stale sync's last write: the status, on the second Service.
		fixtures.Eventually(t, 30*time.Second, poll, "the stale sync's status on "+ns+"/"+name, func() bool {
			svc := get(t, ns, name)
			return svc.UID != first && len(svc.Status.LoadBalancer.Ingress) > 0
		})
		s.CCM.Stop()
		s.CCM.Gate.Before(nil)
		held = false
		ensured := len(ensuredLines(ns, name))
		if err := s.CCM.Start(); err != nil {
			t.Fatal(err)
		}

		svc := get(t, ns, name)
		x := svc.Annotations[ccm.AnnotationPrivateIPIDs]
		// The stale sync's writes: the second Service names the Load
		// Balancer made for the first, its reservation attached to it.
		var lb *lbapi.LB
		fixtures.Eventually(t, 60*time.Second, poll, x+" attached to the Load Balancer named for "+string(first), func() bool {
			lb = loadBalancerOf(t, get(t, ns, name))
			ip, ok := s.Emu.IP(x)
			return lb != nil && ok && ip.Resource != nil && ip.Resource.ID == lb.ID
		})
		if !strings.HasSuffix(lb.Name, string(first)) {
			t.Fatalf("want the Load Balancer of %s/%s named for the previous Service %s, got %q", ns, name, first, lb.Name)
		}
		// The next CCM's own sync adopts it.
		fixtures.Eventually(t, 60*time.Second, poll, "the next CCM's sync of "+ns+"/"+name, func() bool {
			return len(ensuredLines(ns, name)) > ensured
		})
		stranded := func() float64 { v, _ := leader(t).Gauge("scw_lb_ipam_sweeper_stranded"); return v }
		before := stranded()
		// The product warns before the deletion: the Service's reservation
		// is attached to a Load Balancer the CCM did not make for it.
		fixtures.Eventually(t, 15*time.Second, poll, "the "+sweeper.EventReasonLoadBalancerNotNamedForService+" Event of "+ns+"/"+name, func() bool {
			return len(eventsOf(t, get(t, ns, name), sweeper.EventReasonLoadBalancerNotNamedForService)) > 0
		})
		if err := s.Kube.Delete(ctx, get(t, ns, name)); err != nil {
			t.Fatal(err)
		}
		fixtures.Eventually(t, 60*time.Second, poll, ns+"/"+name+" gone", func() bool {
			return apierrors.IsNotFound(s.Kube.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &corev1.Service{}))
		})
		if lines := s.CCM.Lines("load balancer for service " + ns + "/" + name + " was renamed, not removing"); len(lines) == 0 {
			t.Errorf("the CCM did not log why it let %s/%s go", ns, name)
		}
		for _, a := range s.Emu.LBAudit(lb.ID) {
			if a.Op == emulator.OpDeleteLB {
				t.Fatalf("the CCM deleted the Load Balancer %s at %s: no leak", lb.ID, a.Time)
			}
		}
		ip, ok := s.Emu.IP(x)
		if !ok || ip.Resource == nil || ip.Resource.ID != lb.ID {
			t.Fatalf("want %s still attached to the leaked Load Balancer %s, got %+v", x, lb.ID, ip)
		}
		if !localrun.Poll(30*time.Second, poll, func() bool { return stranded() > before }) {
			ip, ok := s.Emu.IP(x)
			var trail []emulator.AuditEvent
			for _, a := range s.Emu.Audit() {
				if strings.Contains(fmt.Sprintf("%+v", a), x) || strings.Contains(fmt.Sprintf("%+v", a), lb.ID) {
					trail = append(trail, a)
				}
			}
			t.Fatalf("the leader did not report %s stranded in 30 s: listed %v, tags %v, resource %+v; audit %+v", x, ok, ip.Tags, ip.Resource, trail)
		}
		// Clean up as an operator would (docs/troubleshooting.md): delete
		// the leaked Load Balancer; the sweeper releases the IP later.
		console, err := s.Console()
		if err != nil {
			t.Fatal(err)
		}
		if err := lbapi.NewZonedAPI(console).DeleteLB(&lbapi.ZonedAPIDeleteLBRequest{LBID: lb.ID}); err != nil {
			t.Fatal(err)
		}
		fixtures.Eventually(t, 60*time.Second, poll, x+" detached", func() bool {
			ip, ok := s.Emu.IP(x)
			return !ok || ip.Resource == nil
		})
	})
}

// replace deletes Service ns/name of UID uid, which carries no finalizer,
// and creates it again.
func replace(ctx context.Context, ns, name string, uid types.UID) error {
	if err := s.Kube.Delete(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}, client.Preconditions{UID: &uid}); err != nil {
		return err
	}
	if !localrun.Poll(10*time.Second, poll, func() bool {
		return apierrors.IsNotFound(s.Kube.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &corev1.Service{}))
	}) {
		var left corev1.Service
		_ = s.Kube.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &left)
		return fmt.Errorf("%s/%s still there 10 s after its delete: finalizers %v", ns, name, left.Finalizers)
	}
	if err := s.Kube.Create(ctx, fixtures.Service(ns, name, map[string]string{request.AnnotationPool: "general"})); err != nil {
		return err
	}
	return nil
}

// ensuredLines are the CCM's log lines of its EnsuredLoadBalancer Events
// on Service ns/name, every process's.
func ensuredLines(ns, name string) []string {
	var out []string
	for _, l := range s.CCM.Lines(`reason="EnsuredLoadBalancer"`) {
		if strings.Contains(l, `object="`+ns+"/"+name+`"`) {
			out = append(out, l)
		}
	}
	return out
}

// loadBalancerOf is the Load Balancer svc's scw-loadbalancer-id names, nil
// when it names none or one that is gone.
func loadBalancerOf(t *testing.T, svc *corev1.Service) *lbapi.LB {
	t.Helper()
	zone, id, ok := strings.Cut(svc.Annotations[ccm.AnnotationLoadBalancerID], "/")
	if !ok {
		return nil
	}
	console, err := s.Console()
	if err != nil {
		t.Fatal(err)
	}
	lb, err := lbapi.NewZonedAPI(console).GetLB(&lbapi.ZonedAPIGetLBRequest{Zone: scw.Zone(zone), LBID: id})
	if err != nil {
		return nil
	}
	return lb
}
