package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	k8sjson "sigs.k8s.io/json"

	"github.com/scw-lb-ipam/scw-lb-ipam/ccm"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
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
	if svc.Spec.Type != corev1.ServiceTypeLoadBalancer || slices.Contains(m.Excluded, req.Namespace) {
		return admission.Allowed(""), resultSkipped
	}
	var old *corev1.Service
	if req.Operation == admissionv1.Update {
		old = &corev1.Service{}
		if err := k8sjson.UnmarshalCaseSensitivePreserveInts(req.OldObject.Raw, old); err != nil {
			return admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding the old Service: %w", err)), resultErrored
		}
		if old.Spec.Type != corev1.ServiceTypeLoadBalancer {
			old = nil // a ClusterIP Service turning LoadBalancer: like a CREATE
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
	ask, err := parseRequest(svc.Annotations)
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
	p, err := makePlan(cfg, req.Namespace, ask)
	if err != nil {
		return m.deny(svc, err), resultDenied
	}
	if p == nil {
		return admission.Allowed(""), resultSkipped
	}
	if keepDHCP {
		w := fmt.Sprintf("scw-lb-ipam: Service %s/%s already has a Load Balancer with a DHCP address and no reserved IP; it keeps that address and nothing was reserved. To move it to a reserved IP (%s), set annotation %s: \"true\" (the CCM re-attaches the Load Balancer: a brief outage)", req.Namespace, svc.Name, p.describe(), ccm.AnnotationAllowIPChange)
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
	if err := m.checkCCMContract(ctx, cfg, svc, ask); err != nil {
		return m.deny(svc, err), resultDenied
	}

	reservations, err := m.reserve(ctx, key, p, own, dryRun)
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
	dhcp := dhcpNote(cfg.ClusterPrivateNetworkID, written)
	for _, r := range reservations {
		warnings = append(warnings, reservedWarning(r))
		reason, verb := EventIPReserved, "reserved"
		if r.Reused {
			reason, verb = EventIPReused, "reused"
		}
		m.event(svc, corev1.EventTypeNormal, reason, "Reserve", "%s %s (IPAM ID %s) from pool %s%s", verb, r.Address, r.ID, r.Pool, dhcp)
	}
	warnings = append(warnings, ccmWarnings(cfg, svc, ask)...)
	if w := proxyProtocolWarning(svc); w != "" {
		warnings = append(warnings, w)
	}
	m.Log.Info(logVerb(reservations), "service", key, "addresses", written[ccm.AnnotationAddresses], "ids", written[ccm.AnnotationPrivateIPIDs])
	return resp.WithWarnings(warnings...), resultPatched
}

// updateDecision is what update decided.
type updateDecision struct {
	resp   admission.Response
	result string
	// done: resp is the answer. Otherwise the UPDATE allocates like a
	// CREATE, for next, unless keepDHCP.
	done bool
	next request
	// keepDHCP: the Load Balancer exists with a DHCP address and no
	// reserved IP, and allow-ip-change is not set: it keeps its address.
	keepDHCP bool
}

// update decides UPDATEs of a Service that already was a LoadBalancer.
func (m *ServiceMutator) update(req admission.Request, old, svc *corev1.Service, ask request) updateDecision {
	prev, _ := parseRequest(old.Annotations)
	oldIDs := old.Annotations[ccm.AnnotationPrivateIPIDs]
	newIDs, hasIDs := svc.Annotations[ccm.AnnotationPrivateIPIDs]

	if oldIDs == "" && ccm.HasLoadBalancer(old) && !ask.AllowIPChange {
		// The live-LB guard: the CCM would re-attach the Private Network
		// with the new IP, so the Load Balancer's address would change.
		if hasIDs && newIDs != "" {
			return updateDecision{done: true, result: resultDenied, resp: m.deny(svc, fmt.Errorf("adding annotation %s to a Service whose Load Balancer already exists would re-attach it with a new address (a brief outage); set annotation %s: \"true\" to allow it, or remove %s", ccm.AnnotationPrivateIPIDs, ccm.AnnotationAllowIPChange, ccm.AnnotationPrivateIPIDs))}
		}
		return updateDecision{next: ask, keepDHCP: true}
	}
	if ask.sameAsk(prev) && (!hasIDs || newIDs == oldIDs) {
		if oldIDs == "" {
			// Nothing was reserved before (say the pool file had no default
			// then) and no Load Balancer exists yet: allocate if the request
			// now calls for it.
			return updateDecision{next: ask}
		}
		if !hasIDs || svc.Annotations[ccm.AnnotationAddresses] != old.Annotations[ccm.AnnotationAddresses] || svc.Annotations[ccm.AnnotationPNIDs] == "" {
			// A server-side apply by a manager that does not own our
			// annotations dropped them: put them back as they were.
			kept := map[string]string{}
			for _, k := range []string{ccm.AnnotationPrivateIPIDs, ccm.AnnotationPNIDs, ccm.AnnotationAddresses} {
				if v, ok := old.Annotations[k]; ok {
					kept[k] = v
				}
			}
			return updateDecision{done: true, result: resultRestored, resp: patchAnnotations(req.Object.Raw, kept)}
		}
		return updateDecision{done: true, result: resultAllowed, resp: admission.Allowed("")}
	}
	if oldIDs != "" && !ask.AllowIPChange {
		what := describeChange(prev, ask, oldIDs, newIDs)
		return updateDecision{done: true, result: resultDenied, resp: m.deny(svc, fmt.Errorf("%s would move the Service to another IP, and the Load Balancer would be re-attached (a brief outage); set annotation %s: \"true\" to allow it, or revert the change", what, ccm.AnnotationAllowIPChange))}
	}
	if !ask.sameAsk(prev) || !hasIDs {
		return updateDecision{next: ask}
	}
	// The request is the same but the IDs were edited by hand, with
	// allow-ip-change: the new IDs are brought-your-own, to validate.
	return updateDecision{next: request{RawIDs: ask.RawIDs, PNIDs: ask.PNIDs}}
}

// userPNs separates the networks a user asked for from those an earlier
// admission added: when pn-ids is still what was written then, the pools'
// networks come off it, so that a Service moving to another pool is not left
// attached to the old pool's network.
func userPNs(cfg *ipam.Config, old *corev1.Service, pnIDs []string) []string {
	if old.Annotations[ccm.AnnotationAddresses] == "" || strings.Join(pnIDs, ",") != old.Annotations[ccm.AnnotationPNIDs] {
		return pnIDs
	}
	var out []string
	for _, id := range pnIDs {
		pooled := false
		for _, p := range cfg.Pools {
			pooled = pooled || (p.PrivateNetworkID == ccm.PrivateNetworkID(id) && id != cfg.ClusterPrivateNetworkID)
		}
		if !pooled {
			out = append(out, id)
		}
	}
	return out
}

func describeChange(prev, ask request, oldIDs, newIDs string) string {
	switch {
	case !slices.Equal(prev.Pools, ask.Pools):
		return fmt.Sprintf("changing annotation %s from %q to %q", ccm.AnnotationPool, strings.Join(prev.Pools, ","), strings.Join(ask.Pools, ","))
	case !slices.Equal(prev.Addresses, ask.Addresses):
		return fmt.Sprintf("changing annotation %s from %q to %q", ccm.AnnotationAddress, joinAddrs(prev.Addresses), joinAddrs(ask.Addresses))
	case !slices.Equal(prev.IDs, ask.IDs):
		return fmt.Sprintf("changing annotation %s from %q to %q", ccm.AnnotationIPAMIDs, strings.Join(prev.IDs, ","), strings.Join(ask.IDs, ","))
	}
	return fmt.Sprintf("changing annotation %s from %q to %q", ccm.AnnotationPrivateIPIDs, oldIDs, newIDs)
}

// reserve runs the plan. When one reservation fails, the ones this admission
// booked are released again, best effort: the sweeper reclaims the rest.
// own are the IDs the Service references now (an UPDATE).
func (m *ServiceMutator) reserve(ctx context.Context, key types.NamespacedName, p *plan, own []string, dryRun bool) ([]*ipam.Reservation, error) {
	var out []*ipam.Reservation
	fail := func(err error) ([]*ipam.Reservation, error) {
		for _, r := range out {
			if rerr := m.Allocator.Release(context.WithoutCancel(ctx), r); rerr != nil {
				m.Log.Error(rerr, "releasing a reservation of a failed admission; the sweeper will reclaim it", "service", key, "ipamID", r.ID)
			}
		}
		return nil, err
	}
	for i, id := range p.ids {
		r, err := m.Allocator.ValidateID(ctx, ipam.IDRequest{ID: id, Service: key, DryRun: dryRun, Own: own})
		if pool := p.fallback(i, err); pool != nil {
			// A restored manifest whose reservation is gone or being
			// released: a fresh address from the same pool, not a denial.
			r, err = m.Allocator.Reserve(ctx, ipam.Request{Pool: pool, Service: key, DryRun: dryRun})
			if err != nil {
				return fail(wrapReserveError(ipam.Request{Pool: pool}, err))
			}
		}
		if err != nil {
			return fail(&annotationError{p.idsFrom, strings.Join(p.ids, ","), err.Error(), err})
		}
		out = append(out, r)
	}
	for _, req := range p.reserve {
		req.Service, req.DryRun, req.Own = key, dryRun, own
		r, err := m.Allocator.Reserve(ctx, req)
		if err != nil {
			return fail(wrapReserveError(req, err))
		}
		out = append(out, r)
	}
	pns := map[string]string{}
	for _, r := range out {
		if other, dup := pns[r.PrivateNetworkID]; dup {
			return fail(fmt.Errorf("IPAM IDs %s and %s are both on Private Network %s, and a Load Balancer takes one IP per Private Network; keep one", other, r.ID, r.PrivateNetworkID))
		}
		pns[r.PrivateNetworkID] = r.ID
	}
	return out, nil
}

func wrapReserveError(req ipam.Request, err error) error {
	switch ipam.ReasonOf(err) {
	case ipam.ReasonAddressOutsidePool, ipam.ReasonAddressTaken, ipam.ReasonAddressRequired:
		return &annotationError{ccm.AnnotationAddress, req.Address.String(), err.Error(), err}
	case ipam.ReasonPoolDisabled, ipam.ReasonPoolExhausted:
		return &annotationError{ccm.AnnotationPool, req.Pool.Name, err.Error(), err}
	}
	return err
}

// deny refuses the admission. A refusal that goes away by itself (the
// previous Load Balancer still holds the IP, a cache that cannot answer)
// is a 429 with Retry-After: kubectl, Helm and every client-go client retry
// it on their own.
func (m *ServiceMutator) deny(svc *corev1.Service, err error) admission.Response {
	m.Log.V(1).Info("denied", "namespace", svc.Namespace, "name", svc.Name, "reason", err.Error())
	resp := admission.Denied("scw-lb-ipam: " + err.Error())
	var ie *ipam.Error
	if errors.As(err, &ie) {
		switch {
		case ie.Retryable():
			resp.Result.Code = http.StatusTooManyRequests
			resp.Result.Reason = metav1.StatusReasonTooManyRequests
			resp.Result.Details = &metav1.StatusDetails{RetryAfterSeconds: retryAfterSeconds}
		case ie.Reason == ipam.ReasonServiceExists:
			resp.Result.Code = http.StatusConflict
			resp.Result.Reason = metav1.StatusReasonAlreadyExists
		}
	}
	return resp
}

// retryAfterSeconds is the Retry-After of retryable refusals: about how long
// a Load Balancer takes to let go of its IP, or a cache to catch up.
const retryAfterSeconds = 2

func (m *ServiceMutator) event(svc *corev1.Service, eventtype, reason, action, note string, args ...any) {
	if m.Recorder != nil {
		m.Recorder.Eventf(svc, nil, eventtype, reason, action, note, args...)
	}
}

// optedIn reads the namespace's opt-in label from the cache. The
// apiserver's namespaceSelector already matched, so a namespace that cannot
// be read (an error, or not in the cache yet) is a retryable refusal, never
// an admission without a reservation.
func (m *ServiceMutator) optedIn(ctx context.Context, namespace string) (bool, error) {
	if m.Namespaces == nil {
		return true, nil
	}
	ns := &corev1.Namespace{}
	if err := m.Namespaces.Get(ctx, client.ObjectKey{Name: namespace}, ns); err != nil {
		m.Log.Error(err, "reading the namespace's opt-in label", "namespace", namespace)
		return false, &ipam.Error{Reason: ipam.ReasonCacheUnavailable, Err: err,
			Message: fmt.Sprintf("namespace %s cannot be read from the cache of scw-lb-ipam right now, so its opt-in label is unknown; nothing was reserved, apply again in a moment", namespace)}
	}
	return ns.Labels[ccm.LabelEnabled] == "true", nil
}

// Unreserved reports whether a live LoadBalancer Service that carries no
// private-ip-ids should have had a reservation: it is in an opted-in
// namespace and asks for one, or falls under a default pool. what names the
// request for the report. The sweeper's leader uses it.
func (m *ServiceMutator) Unreserved(ctx context.Context, svc *corev1.Service) (bool, string, error) {
	if svc.Spec.Type != corev1.ServiceTypeLoadBalancer || slices.Contains(m.Excluded, svc.Namespace) {
		return false, "", nil
	}
	opted, err := m.optedIn(ctx, svc.Namespace)
	if err != nil || !opted {
		return false, "", err
	}
	ask, err := parseRequest(svc.Annotations)
	if err != nil {
		return false, "", nil
	}
	p, err := makePlan(m.Allocator.Config(), svc.Namespace, ask)
	if err != nil || p == nil {
		return false, "", nil
	}
	return true, p.describe(), nil
}

// reservedAnnotations are the CCM's annotations and ours for the
// reservations. spec.loadBalancerIP is never written: the CCM reads the IDs.
func reservedAnnotations(clusterPN string, userPNs []string, rs []*ipam.Reservation) map[string]string {
	ids := make([]string, len(rs))
	addrs := make([]string, len(rs))
	for i, r := range rs {
		ids[i], addrs[i] = r.ID, r.Address.String()
	}
	return map[string]string{
		ccm.AnnotationPrivateIPIDs: strings.Join(ids, ","),
		ccm.AnnotationPNIDs:        unionPNs(userPNs, clusterPN, rs),
		ccm.AnnotationAddresses:    strings.Join(addrs, ","),
	}
}

// patchAnnotations sets annotations on the raw object and answers with the
// patch. It edits the JSON as it came rather than a re-encoded Service: a
// typed round trip would drop fields this build does not know (a newer
// apiserver's), and the patch would remove them.
func patchAnnotations(raw []byte, set map[string]string) admission.Response {
	var obj map[string]any
	if err := k8sjson.UnmarshalCaseSensitivePreserveInts(raw, &obj); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	md, _ := obj["metadata"].(map[string]any)
	if md == nil {
		md = map[string]any{}
		obj["metadata"] = md
	}
	ann, _ := md["annotations"].(map[string]any)
	if ann == nil {
		ann = map[string]any{}
		md["annotations"] = ann
	}
	for k, v := range set {
		ann[k] = v
	}
	mutated, err := json.Marshal(obj)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	return admission.PatchResponseFromRaw(raw, mutated)
}

func reservedWarning(r *ipam.Reservation) string {
	switch {
	case r.BringYourOwn:
		return fmt.Sprintf("scw-lb-ipam: using %s (IPAM ID %s, pool %s), validated; it was reserved outside scw-lb-ipam and will never be released by it", r.Address, r.ID, r.Pool)
	case r.Reused:
		return fmt.Sprintf("scw-lb-ipam: reused %s (IPAM ID %s) from pool %s, retained for this Service", r.Address, r.ID, r.Pool)
	}
	return fmt.Sprintf("scw-lb-ipam: reserved %s (IPAM ID %s) from pool %s", r.Address, r.ID, r.Pool)
}

func logVerb(rs []*ipam.Reservation) string {
	for _, r := range rs {
		if !r.Reused {
			return "reserved"
		}
	}
	return "reused"
}

func dryRunWarnings(rs []*ipam.Reservation) []string {
	out := make([]string, 0, len(rs))
	for _, r := range rs {
		addr := "an address IPAM chooses"
		if r.Address.IsValid() {
			addr = r.Address.String()
		}
		switch {
		case r.ID != "" && r.Reused:
			out = append(out, fmt.Sprintf("scw-lb-ipam: dry run: would reuse %s (IPAM ID %s) from pool %s; nothing was changed", addr, r.ID, r.Pool))
		case r.ID != "":
			out = append(out, fmt.Sprintf("scw-lb-ipam: dry run: would use %s (IPAM ID %s) from pool %s; nothing was changed", addr, r.ID, r.Pool))
		default:
			out = append(out, fmt.Sprintf("scw-lb-ipam: dry run: would reserve %s from pool %s; nothing was booked", addr, r.Pool))
		}
	}
	return out
}
