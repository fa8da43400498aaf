package webhook

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/go-logr/logr"
	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	k8sjson "sigs.k8s.io/json"

	"github.com/scw-lb-ipam/scw-lb-ipam/ccm"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
	"github.com/scw-lb-ipam/scw-lb-ipam/request"
)

// Event reasons recorded on Services.
const (
	EventIPReserved          = "IPReserved"
	EventIPReused            = "IPReused"
	EventIPReservationFailed = "IPReservationFailed"
	// EventIPNotReserved: a Service whose Load Balancer exists with a DHCP
	// address keeps it; see ccm.HasLoadBalancer.
	EventIPNotReserved = "IPNotReserved"
)

// EventRecorder is the events API recorder (controller-runtime's
// GetEventRecorder).
type EventRecorder interface {
	Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any)
}

// Allocator is what the webhook needs of allocator.Allocator.
type Allocator interface {
	Config() *ipam.Config
	Reserve(ctx context.Context, req ipam.Request) (*ipam.Grant, error)
	ValidateID(ctx context.Context, req ipam.IDRequest) (*ipam.Grant, error)
	Release(ctx context.Context, r *ipam.Grant) error
	PrivateNetworkExists(ctx context.Context, id string) (bool, error)
	// Remember records the IDs the Service cache shows on a Service, so
	// that a re-create finds reservations this replica has not listed yet.
	Remember(svc types.NamespacedName, ids []string)
}

// ServiceMutator reserves IPs for LoadBalancer Services at admission and
// writes the CCM's annotations.
type ServiceMutator struct {
	Allocator Allocator
	// Namespaces reads Namespace objects (a cache) to check the opt-in
	// label: the webhook configuration's namespaceSelector is the first
	// fence, this is the second.
	Namespaces client.Reader
	// NamespacesLive reads a Namespace from the apiserver itself when the
	// cache says it is not opted in: the apiserver's namespaceSelector
	// matched, so a label added a moment ago may not have reached the cache
	// yet, and admitting untouched would leave the Service on a DHCP
	// address. nil trusts the cache.
	NamespacesLive client.Reader
	// Excluded namespaces are never touched (kube-system, the release's own).
	Excluded []string
	Recorder EventRecorder
	Metrics  *Metrics
	Log      logr.Logger

	// held are the Events of admitted CREATEs, until the Service exists.
	held heldEvents
}

var _ admission.Handler = (*ServiceMutator)(nil)

// Handle implements admission.Handler: it decodes and filters the request,
// judges a CREATE (create) or an UPDATE (update), and renders the one
// decision they return (respond).
func (m *ServiceMutator) Handle(ctx context.Context, req admission.Request) admission.Response {
	start := time.Now()
	svc, old, d, judge := m.filter(ctx, req)
	if !judge {
		return m.respond(req, svc, d, start)
	}
	cfg := m.Allocator.Config()
	ns := request.JudgedNamespace(cfg, req.Namespace, func(k string) string { return svc.Labels[k] })
	if ns != req.Namespace && (old == nil || old.Annotations[request.AnnotationAddresses] == "") {
		// A Gateway's Service is judged by its Gateway's namespace, which
		// must have opted in too: a pool for "every opted-in namespace" is
		// not one for a namespace that has not. One already holding our
		// reservations keeps the UPDATE rules (a re-apply is put back).
		opted, err := m.gatewayOptedIn(ctx, ns)
		if err != nil || !opted {
			d := decision{result: resultSkipped, err: err}
			if err != nil {
				d = refusal(err)
			}
			resp := m.respond(req, svc, d, start)
			if err == nil {
				resp = resp.WithWarnings(fmt.Sprintf("scw-lb-ipam: the Service belongs to a Gateway of namespace %s (label %s), and namespace %s of its Gateway has not opted in (label %s: \"true\"): nothing was reserved; label the namespace to have scw-lb-ipam reserve for its Gateways", ns, cfg.GatewayLabel(req.Namespace), ns, request.LabelEnabled))
			}
			return resp
		}
	}
	ask, tr, err := request.Read(cfg, ns, svc.Annotations, svc.Spec.LoadBalancerIP)
	if tr.ClearLoadBalancerIP {
		svc.Spec.LoadBalancerIP = ""
	}
	switch {
	case err != nil:
		d = refusal(err)
	case old == nil:
		d = m.create(ctx, req, cfg, svc, ns, ask)
	default:
		d = m.update(ctx, req, cfg, old, svc, ns, ask)
	}
	d.err = ask.InWords(d.err)
	resp := translated(m.respond(req, svc, d, start), tr)
	if req.Operation == admissionv1.Create {
		resp = withoutRestoredLoadBalancerID(resp, svc)
	}
	return resp
}

// withoutRestoredLoadBalancerID drops the CCM's scw-loadbalancer-id from an
// admitted CREATE of a saved Service (kubectl get -o yaml, a Velero
// restore): one that also carries what only an earlier admission and the
// CCM write, scw-lb-ipam.io/addresses or the CCM's cleanup finalizer. Its
// ID names an earlier Service's Load Balancer: the CCM would take that one
// for this Service's, and once it is gone its delete path answers "not
// found" and lets the Service go while the Load Balancer it made meanwhile
// stays, holding the reserved IP. An ID a user set on a new Service (the
// CCM adopts that Load Balancer) and an externally managed one stay.
func withoutRestoredLoadBalancerID(resp admission.Response, svc *corev1.Service) admission.Response {
	id, ok := svc.Annotations[ccm.AnnotationLoadBalancerID]
	_, admitted := svc.Annotations[request.AnnotationAddresses]
	saved := admitted || slices.Contains(svc.Finalizers, ccm.FinalizerLoadBalancerCleanup)
	if !ok || !saved || !resp.Allowed || ccm.ExternallyManaged(ccm.Of(svc.Annotations)) {
		return resp
	}
	resp.Patches = append(resp.Patches, jsonpatch.NewOperation("remove", "/metadata/annotations/"+pointerEscape.Replace(ccm.AnnotationLoadBalancerID), nil))
	return resp.WithWarnings(fmt.Sprintf("scw-lb-ipam: annotation %s is dropped: this is a saved Service (it carries %s or the CCM's finalizer), so %q names the Load Balancer of an earlier Service, and the CCM writes the annotation once it made this Service's own; keep it only with %s: \"true\"", ccm.AnnotationLoadBalancerID, request.AnnotationAddresses, id, ccm.AnnotationExternallyManaged))
}

// translated adds to an answer what reading other implementations' words
// did: the warnings that name them, and spec.loadBalancerIP cleared from an
// admitted Service (the CCM refuses it on a private Load Balancer).
func translated(resp admission.Response, tr request.Translation) admission.Response {
	if resp.Result != nil && resp.Result.Code == http.StatusBadRequest {
		return resp
	}
	if tr.ClearLoadBalancerIP && resp.Allowed {
		resp.Patches = append(resp.Patches, jsonpatch.NewOperation("remove", "/spec/loadBalancerIP", nil))
	}
	resp.Warnings = append(slices.Clip(tr.Warnings), resp.Warnings...)
	return resp
}

// Admission results for metrics.
const (
	resultSkipped  = "skipped"
	resultPatched  = "patched"
	resultAllowed  = "allowed"
	resultDenied   = "denied"
	resultErrored  = "errored"
	resultDryRun   = "dry_run"
	resultRestored = "restored"
	resultKept     = "kept_dhcp"
	resultCCM      = "ccm_write"
)

// filter decodes the request and answers at once what is not ours to
// judge: judge is true for a CREATE, or an UPDATE of a Service that was a
// LoadBalancer (old, nil for a CREATE), in scope, in an opted-in namespace.
func (m *ServiceMutator) filter(ctx context.Context, req admission.Request) (svc, old *corev1.Service, d decision, judge bool) {
	if req.Kind.Kind != "Service" || req.Kind.Group != "" {
		return nil, nil, errored(fmt.Errorf("this webhook admits core/v1 Services, not %s", req.Kind.String())), false
	}
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		return nil, nil, decision{result: resultSkipped}, false
	}
	svc = &corev1.Service{}
	// Case-sensitive, as the apiserver decodes: "metAdAtA" is not metadata.
	if err := k8sjson.UnmarshalCaseSensitivePreserveInts(req.Object.Raw, svc); err != nil || svc.Kind != "Service" {
		if err == nil {
			err = errors.New("the object is not a Service")
		}
		return nil, nil, errored(fmt.Errorf("decoding the Service: %w", err)), false
	}
	if !ccm.Served(svc) || slices.Contains(m.Excluded, req.Namespace) {
		return svc, nil, decision{result: resultSkipped}, false
	}
	if req.Operation == admissionv1.Update {
		old = &corev1.Service{}
		if err := k8sjson.UnmarshalCaseSensitivePreserveInts(req.OldObject.Raw, old); err != nil {
			return svc, nil, errored(fmt.Errorf("decoding the old Service: %w", err)), false
		}
		if old.Spec.Type != corev1.ServiceTypeLoadBalancer && !ccm.HasLoadBalancer(old) {
			// A ClusterIP Service turning LoadBalancer: like a CREATE. One
			// that was a LoadBalancer a moment ago still has its Load
			// Balancer (the CCM's marks are there): the CCM may take it up
			// again, so it is judged as an UPDATE of that one.
			old = nil
		} else if ccm.OnlyCCMChanges(old, svc) {
			// The CCM's finalizer and LB ID: never ours to judge, whatever
			// the annotations say, with no IPAM call. Judging them (say,
			// allocating for a Service admitted unreserved when the CCM adds
			// its finalizer) would race the CCM creating the Load Balancer,
			// or leave it stuck.
			return svc, nil, decision{result: resultCCM}, false
		}
	}
	if opted, err := m.optedIn(ctx, req.Namespace); err != nil {
		return svc, nil, refusal(err), false
	} else if !opted {
		return svc, nil, decision{result: resultSkipped}, false
	}
	return svc, old, decision{}, true
}

// gatewayOptedIn reads the opt-in label of a Gateway's namespace
// (request.GatewayOptedIn): the cache, then the apiserver when the cache
// says no (NamespacesLive). A failure is a retryable refusal, as for the
// Service's own.
func (m *ServiceMutator) gatewayOptedIn(ctx context.Context, ns string) (bool, error) {
	readers := []client.Reader{m.Namespaces}
	if m.NamespacesLive != nil {
		readers = append(readers, m.NamespacesLive)
	}
	opted, err := request.GatewayOptedIn(ctx, ns, readers...)
	if err != nil {
		return false, &ipam.Error{Reason: ipam.ReasonCacheUnavailable, Err: err,
			Message: fmt.Sprintf("namespace %s of the Service's Gateway cannot be read right now, so its opt-in label is unknown; nothing was reserved, apply again in a moment", ns)}
	}
	return opted, nil
}

// optedIn reads the namespace's opt-in label from the cache. The
// apiserver's namespaceSelector already matched, so a namespace that cannot
// be read (an error, or not in the cache yet) is a retryable refusal, never
// an admission without a reservation; and one the cache shows without the
// label is read once more from the apiserver (see NamespacesLive).
func (m *ServiceMutator) optedIn(ctx context.Context, namespace string) (bool, error) {
	opted, err := request.OptedIn(ctx, m.Namespaces, namespace)
	if err == nil && opted {
		return true, nil
	}
	if m.NamespacesLive != nil {
		lopted, lerr := request.OptedIn(ctx, m.NamespacesLive, namespace)
		if lerr == nil {
			return lopted, nil
		}
		if err == nil {
			err = lerr
		}
	} else if err == nil {
		return false, nil
	}
	m.Log.Error(err, "reading the namespace's opt-in label", "namespace", namespace)
	return false, &ipam.Error{Reason: ipam.ReasonCacheUnavailable, Err: err,
		Message: fmt.Sprintf("namespace %s cannot be read from the cache of scw-lb-ipam right now, so its opt-in label is unknown; nothing was reserved, apply again in a moment", namespace)}
}
