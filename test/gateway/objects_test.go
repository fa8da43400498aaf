package gateway

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	ipamapi "github.com/scaleway/scaleway-sdk-go/api/ipam/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/scw-lb-ipam/scw-lb-ipam/ccm"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
	"github.com/scw-lb-ipam/scw-lb-ipam/request"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/emulator"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/fixtures"
)

// poll is how often the scenarios look again.
const (
	poll = 200 * time.Millisecond
	// attachWait bounds a Gateway's first address and a re-created one's:
	// the controller's reconcile, then the CCM's retries while
	// the old Load Balancer, deleted, still holds the address (3 s in the
	// emulator; the service controller's backoff starts at 5 s and
	// doubles).
	attachWait = 90 * time.Second
)

const gatewayClassName = "eg"

// gatewayClass is the GatewayClass of Envoy Gateway's controller.
func gatewayClass() *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass",
		"metadata": map[string]any{"name": gatewayClassName},
		"spec":     map[string]any{"controllerName": controllerName},
	}}
	return u
}

// gateway is Gateway ns/name with one HTTP listener on port, asking in its
// infrastructure annotations (which the controller copies onto its
// Service) for a private Load Balancer with an address from the pool.
func gateway(ns, name string, port int64) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
		"metadata": map[string]any{"namespace": ns, "name": name},
		"spec": map[string]any{
			"gatewayClassName": gatewayClassName,
			"infrastructure": map[string]any{"annotations": map[string]any{
				request.AnnotationPool: pool, ccm.AnnotationPrivate: "true",
			}},
			"listeners": []any{map[string]any{"name": "http", "protocol": "HTTP", "port": port}},
		},
	}}
}

// setListenerPort moves the Gateway's listener to port.
func setListenerPort(t *testing.T, ns, name string, port int64) {
	t.Helper()
	gw := gateway(ns, name, 0)
	patch := fmt.Appendf(nil, `{"spec":{"listeners":[{"name":"http","protocol":"HTTP","port":%d}]}}`, port)
	if err := w.Kube.Patch(ctx, gw, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
}

// deleteGateway deletes the Gateway and waits until its Service is gone
// and the CCM has deleted its Load Balancer (its finalizer). In
// the default mode the controller deletes the Service; in GatewayNamespace
// mode the Service's owner is the Gateway and the controller leaves it to
// Kubernetes' garbage collector, which no kube-controller-manager runs
// here: the suite deletes a Service the Gateway owns, as the collector
// would.
func deleteGateway(t *testing.T, ns, name string) {
	t.Helper()
	if err := w.Kube.Delete(ctx, gateway(ns, name, 0)); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	if svc := w.service(t, ns, name); svc != nil && ownedByGateway(svc, name) {
		if err := w.Kube.Delete(ctx, svc); err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
	}
	fixtures.EventuallySays(t, time.Minute, poll, "the Service of Gateway "+ns+"/"+name+" gone", func() (bool, string) {
		svc := w.service(t, ns, name)
		return svc == nil, describe(svc)
	})
}

// service is the Service the controller made for Gateway ns/name, found by
// its owning-gateway labels in any namespace; nil while there is none.
func (w *world) service(t *testing.T, ns, name string) *corev1.Service {
	t.Helper()
	list := &corev1.ServiceList{}
	if err := w.Kube.List(ctx, list, client.MatchingLabels{owningNamespace: ns, owningName: name}); err != nil {
		t.Fatal(err)
	}
	switch len(list.Items) {
	case 0:
		return nil
	case 1:
		return &list.Items[0]
	}
	t.Fatalf("Gateway %s/%s has %d Services", ns, name, len(list.Items))
	return nil
}

// ownedByGateway reports whether the Gateway name owns svc.
func ownedByGateway(svc *corev1.Service, name string) bool {
	return slices.ContainsFunc(svc.OwnerReferences, func(o metav1.OwnerReference) bool { return o.Kind == "Gateway" && o.Name == name })
}

func hasPort(svc *corev1.Service, port int32) bool {
	return slices.ContainsFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return p.Port == port })
}

// state is what a Gateway's Service got: what later steps must keep.
type state struct {
	svc      types.NamespacedName
	uid      string
	id, addr string
	lb       string
}

// admitted waits until the Service of Gateway ns/name holds one reservation
// attached by the CCM, and checks where it lives (by mode), that
// the address is on the pool's network, and that the controller applied it
// server-side as field manager envoy-gateway; it waits for the sweeper's
// back-fill of the uid, which a re-create finds the reservation by.
func (w *world) admitted(t *testing.T, c *controller, ns, name, mode string) *state {
	t.Helper()
	st := w.attachedService(t, c, ns, name, "", attachWait)
	wantNS := ns
	if mode == controllerMode {
		wantNS = controllerNamespace
	}
	if st.svc.Namespace != wantNS {
		t.Errorf("%s: the Service of Gateway %s/%s is in %s, want %s", mode, ns, name, st.svc.Namespace, wantNS)
	}
	ip, _ := w.Emu.IP(st.id)
	if got := w.networkOf(ip); got != w.PNs["dc"].ID {
		t.Errorf("%s: %s (IPAM ID %s) is on Private Network %q, want the pool's %s", mode, st.addr, st.id, got, w.PNs["dc"].ID)
	}
	svc := w.service(t, ns, name)
	if !slices.ContainsFunc(svc.ManagedFields, func(f metav1.ManagedFieldsEntry) bool { return f.Manager == "envoy-gateway" && f.Operation == "Apply" }) {
		t.Errorf("%s: %s has no server-side apply by envoy-gateway: %v", mode, st.svc, svc.ManagedFields)
	}
	fixtures.EventuallySays(t, 15*time.Second, poll, "the uid of "+st.svc.String()+" back-filled on "+st.id, func() (bool, string) {
		ip, _ := w.Emu.IP(st.id)
		e, _ := ipam.ParseEntry(ip.Tags)
		return e.UID == st.uid, fmt.Sprintf("tags %v", ip.Tags)
	})
	return st
}

// attachedService waits until the Service of Gateway ns/name (other than
// the one of uid not, if set) holds one reservation, attached to its Load
// Balancer with its address in the status, and returns it.
func (w *world) attachedService(t *testing.T, c *controller, ns, name, not string, wait time.Duration) *state {
	t.Helper()
	st := &state{}
	fixtures.EventuallySays(t, wait, poll, "the Service of Gateway "+ns+"/"+name+" with its reservation attached", func() (bool, string) {
		if err := c.Exited(); err != nil {
			t.Fatal(err)
		}
		svc := w.service(t, ns, name)
		if svc == nil || string(svc.UID) == not {
			return false, "no new Service yet"
		}
		st.svc, st.uid = client.ObjectKeyFromObject(svc), string(svc.UID)
		st.id, st.addr = svc.Annotations[ccm.AnnotationPrivateIPIDs], svc.Annotations[request.AnnotationAddresses]
		_, st.lb, _ = strings.Cut(svc.Annotations[ccm.AnnotationLoadBalancerID], "/")
		ip, ok := w.Emu.IP(st.id)
		switch {
		case st.id == "" || strings.Contains(st.id, ","):
			return false, describe(svc)
		case !ok || st.lb == "" || ip.Resource == nil || ip.Resource.ID != st.lb:
			return false, "not attached yet: " + describe(svc)
		}
		ingress := slices.ContainsFunc(svc.Status.LoadBalancer.Ingress, func(in corev1.LoadBalancerIngress) bool { return in.IP == st.addr })
		return ingress, fmt.Sprintf("status ingress %v lacks %s", svc.Status.LoadBalancer.Ingress, st.addr)
	})
	return st
}

// kept checks, after step, that the Service is the same object with the
// same reservation, still attached to the same Load Balancer.
func (w *world) kept(t *testing.T, step string, st *state) {
	t.Helper()
	svc := &corev1.Service{}
	if err := w.Kube.Get(ctx, st.svc, svc); err != nil {
		t.Fatalf("after %s: %v", step, err)
	}
	w.same(t, step, st, svc)
	if string(svc.UID) != st.uid {
		t.Errorf("after %s: %s was re-created (uid %s, was %s)", step, st.svc, svc.UID, st.uid)
	}
	if _, lb, _ := strings.Cut(svc.Annotations[ccm.AnnotationLoadBalancerID], "/"); lb != st.lb {
		t.Errorf("after %s: the Service's Load Balancer is %q, was %s", step, lb, st.lb)
	}
	if ip, _ := w.Emu.IP(st.id); ip.Resource == nil || ip.Resource.ID != st.lb {
		t.Errorf("after %s: IPAM ID %s (%s) is no longer attached to the Load Balancer %s", step, st.id, st.addr, st.lb)
	}
}

// madeFrontend reports whether the emulator made a frontend on Load
// Balancer lb since its request from.
func (w *world) madeFrontend(lb string, from int) bool {
	for _, r := range w.Emu.Requests()[from:] {
		if r.Op == emulator.OpCreateFrontend && r.Status == http.StatusOK && strings.Contains(r.Path, "/lbs/"+lb+"/") {
			return true
		}
	}
	return false
}

// same checks that the Service holds the reservation of st, and pn-ids
// still lists the pool's network.
func (w *world) same(t *testing.T, step string, st *state, svc *corev1.Service) {
	t.Helper()
	for _, problem := range fixtures.Unkept(svc, st.addr, st.id, w.PNs["dc"].ID) {
		t.Errorf("after %s: %s", step, problem)
	}
}

// recreated waits until the Gateway's new Service is attached, and checks
// that it got the old reservation on a new Load Balancer.
func (w *world) recreated(t *testing.T, c *controller, ns, name string, old *state) *state {
	t.Helper()
	st := w.attachedService(t, c, ns, name, old.uid, attachWait)
	svc := &corev1.Service{}
	if err := w.Kube.Get(ctx, st.svc, svc); err != nil {
		t.Fatal(err)
	}
	w.same(t, "the Gateway's re-create", old, svc)
	if st.lb == old.lb {
		t.Errorf("after the Gateway's re-create: the new Service is on the old Load Balancer %s", st.lb)
	}
	return st
}

// networkOf is the Private Network of an IP, found by its subnet.
func (w *world) networkOf(ip ipamapi.IP) string {
	if ip.Source == nil || ip.Source.SubnetID == nil {
		return ""
	}
	for _, pn := range w.PNs {
		if slices.ContainsFunc(pn.Subnets, func(sn emulator.Subnet) bool { return sn.ID == *ip.Source.SubnetID }) {
			return pn.ID
		}
	}
	return ""
}
