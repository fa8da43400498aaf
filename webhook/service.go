package webhook

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
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

// Allocator is what the webhook needs of ipam.Allocator.
type Allocator interface {
	Config() *ipam.Config
	Reserve(ctx context.Context, req ipam.Request) (*ipam.Reservation, error)
	ValidateID(ctx context.Context, req ipam.IDRequest) (*ipam.Reservation, error)
	Release(ctx context.Context, r *ipam.Reservation) error
	PrivateNetworkExists(ctx context.Context, id string) (bool, error)
	// Remember records the IDs the Service cache shows on a Service, so
	// that a re-create finds reservations this replica has not listed yet.
	Remember(svc types.NamespacedName, ids []string)
}

var _ Allocator = (*ipam.Allocator)(nil)

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
}

var _ admission.Handler = (*ServiceMutator)(nil)

// Handle implements admission.Handler.
func (m *ServiceMutator) Handle(ctx context.Context, req admission.Request) admission.Response {
	start := time.Now()
	resp, result := m.handle(ctx, req)
	if m.Metrics != nil {
		m.Metrics.observeAdmission(string(req.Operation), result, time.Since(start))
	}
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

func (m *ServiceMutator) handle(ctx context.Context, req admission.Request) (admission.Response, string) {
	if req.Kind.Kind != "Service" || req.Kind.Group != "" {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("this webhook admits core/v1 Services, not %s", req.Kind.String())), resultErrored
	}
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		return admission.Allowed(""), resultSkipped
	}
	svc := &corev1.Service{}
	// Case-sensitive, as the apiserver decodes: "metAdAtA" is not metadata.
	if err := k8sjson.UnmarshalCaseSensitivePreserveInts(req.Object.Raw, svc); err != nil || svc.Kind != "Service" {
		if err == nil {
			err = errors.New("the object is not a Service")
		}
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding the Service: %w", err)), resultErrored
	}
	if !request.InScope(svc) || slices.Contains(m.Excluded, req.Namespace) {
		return admission.Allowed(""), resultSkipped
	}
	var old *corev1.Service
	if req.Operation == admissionv1.Update {
		old = &corev1.Service{}
		if err := k8sjson.UnmarshalCaseSensitivePreserveInts(req.OldObject.Raw, old); err != nil {
			return admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding the old Service: %w", err)), resultErrored
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
			return admission.Allowed(""), resultCCM
		}
	}
	if opted, err := m.optedIn(ctx, req.Namespace); err != nil {
		return m.deny(svc, err), resultDenied
	} else if !opted {
		return admission.Allowed(""), resultSkipped
	}
	ask, err := request.Parse(svc.Annotations)
	if err != nil {
		return m.deny(svc, err), resultDenied
	}
	dryRun := req.DryRun != nil && *req.DryRun

	var own []string
	keepDHCP := false
	if old != nil {
		d := m.update(req, old, svc, ask)
		if d.done {
			return d.resp, d.result
		}
		ask, keepDHCP = d.next, d.keepDHCP
		ask.PNIDs = userPNs(m.Allocator.Config(), old, ask.PNIDs)
		own = ccm.ReferencedIDs(old)
	}

	cfg := m.Allocator.Config()
	p, err := request.NewPlan(cfg, req.Namespace, ask)
	if err != nil {
		return m.deny(svc, err), resultDenied
	}
	if p == nil {
		return admission.Allowed(""), resultSkipped
	}
	if keepDHCP {
		w := fmt.Sprintf("scw-lb-ipam: Service %s/%s already has a Load Balancer with a DHCP address and no reserved IP; it keeps that address and nothing was reserved. To move it to a reserved IP (%s), set annotation %s: \"true\" (the CCM re-attaches the Load Balancer: a brief outage)", req.Namespace, svc.Name, p.Describe(), request.AnnotationAllowIPChange)
		if !dryRun {
			m.event(svc, corev1.EventTypeWarning, EventIPNotReserved, "Reserve", "%s", strings.TrimPrefix(w, "scw-lb-ipam: "))
		}
		return admission.Allowed("").WithWarnings(w), resultKept
	}
	name := req.Name
	if name == "" {
		name = svc.Name
	}
	if name == "" {
		return m.deny(svc, errors.New("the Service has only generateName: scw-lb-ipam keeps a Service's IP across re-creation by its name, so it needs a fixed metadata.name; set one")), resultDenied
	}
	key := types.NamespacedName{Namespace: req.Namespace, Name: name}
	if err := request.CheckBeforeBooking(ctx, cfg, svc, ask, p, m.Allocator.PrivateNetworkExists); err != nil {
		return m.deny(svc, err), resultDenied
	}

	reservations, err := m.reserve(ctx, key, p, own, dryRun)
	if err == nil {
		// Brought-your-own IDs name their networks only once validated.
		if err = request.CheckReserved(cfg, ask, p, reservations); err != nil {
			m.releaseBooked(ctx, key, reservations)
		}
	}
	if err != nil {
		if !dryRun {
			m.event(svc, corev1.EventTypeWarning, EventIPReservationFailed, "Reserve", "%s", err.Error())
		}
		return m.deny(svc, err), resultDenied
	}
	if dryRun {
		return admission.Allowed("").WithWarnings(dryRunWarnings(reservations)...), resultDryRun
	}

	written := reservedAnnotations(cfg.ClusterPrivateNetworkID, ask.PNIDs, reservations)
	resp := patchAnnotations(req.Object.Raw, written)
	warnings := make([]string, 0, len(reservations)+3)
	dhcp := request.DHCPNote(cfg.ClusterPrivateNetworkID, written)
	for _, r := range reservations {
		warnings = append(warnings, reservedWarning(r))
		reason, verb := EventIPReserved, "reserved"
		if r.Reused {
			reason, verb = EventIPReused, "reused"
		}
		m.event(svc, corev1.EventTypeNormal, reason, "Reserve", "%s %s (IPAM ID %s) from pool %s%s", verb, r.Address, r.ID, r.Pool, dhcp)
	}
	warnings = append(warnings, request.Warnings(cfg, svc, ask)...)
	m.Log.Info(logVerb(reservations), "service", key, "addresses", written[request.AnnotationAddresses], "ids", written[ccm.AnnotationPrivateIPIDs])
	return resp.WithWarnings(warnings...), resultPatched
}

func (m *ServiceMutator) event(svc *corev1.Service, eventtype, reason, action, note string, args ...any) {
	if m.Recorder != nil {
		m.Recorder.Eventf(svc, nil, eventtype, reason, action, note, args...)
	}
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
