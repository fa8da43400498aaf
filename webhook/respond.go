package webhook

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	k8sjson "sigs.k8s.io/json"

	"github.com/scw-lb-ipam/scw-lb-ipam/ccm"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
	"github.com/scw-lb-ipam/scw-lb-ipam/request"
	"github.com/scw-lb-ipam/scw-lb-ipam/servicecache"
)

// decision is what one admission decided, for respond to render; create
// and update each return one.
type decision struct {
	// result is the metric label.
	result string
	// err is why the request cannot be judged (errored, a 400) or is
	// refused (denied); failed also records a refusal on the Service
	// (IPReservationFailed): reserving was tried.
	err    error
	failed bool
	// keptDHCP is the warning of a Service that keeps the DHCP address of
	// its Load Balancer (also its IPNotReserved Event).
	keptDHCP string
	// set are the annotations an UPDATE puts back as an earlier admission
	// or the CCM wrote them (restored, or with a patch or a kept DHCP
	// address), and unset those an admission wrote that no longer hold.
	set   map[string]string
	unset []string
	// notes are warnings of what the answer puts back, whatever its result.
	notes []string
	// reserved is what the admission reserved (patched), or would (dry
	// run), for key under cfg; ask is the request it reserved for (its
	// pn-ids, its warnings).
	reserved []*ipam.Grant
	key      types.NamespacedName
	ask      request.Ask
	cfg      *ipam.Config
	dryRun   bool
}

func errored(err error) decision { return decision{result: resultErrored, err: err} }

func refusal(err error) decision { return decision{result: resultDenied, err: err} }

// respond renders a decision: the patch and its pn-ids union, the warnings,
// the Events, the log line and the metric.
func (m *ServiceMutator) respond(req admission.Request, svc *corev1.Service, d decision, start time.Time) admission.Response {
	resp := admission.Allowed("")
	switch d.result {
	case resultErrored:
		resp = admission.Errored(http.StatusBadRequest, d.err)
	case resultDenied:
		if d.failed && !d.dryRun {
			m.event(svc, corev1.EventTypeWarning, EventIPReservationFailed, "Reserve", "%s", d.err.Error())
		}
		resp = m.deny(svc, d.err)
	case resultKept:
		if !d.dryRun {
			m.event(svc, corev1.EventTypeWarning, EventIPNotReserved, "Reserve", "%s", strings.TrimPrefix(d.keptDHCP, "scw-lb-ipam: "))
		}
		if len(d.set) > 0 {
			resp = patchAnnotations(svc, req.Object.Raw, d.set, nil)
		}
		resp = resp.WithWarnings(d.keptDHCP)
	case resultDryRun:
		if len(d.set) > 0 {
			resp = patchAnnotations(svc, req.Object.Raw, d.set, nil)
		}
		resp = resp.WithWarnings(dryRunWarnings(d.reserved)...)
	case resultPatched:
		resp = m.patched(req, svc, d)
	case resultRestored:
		resp = patchAnnotations(svc, req.Object.Raw, d.set, d.unset)
	}
	if len(d.notes) > 0 {
		resp = resp.WithWarnings(append(resp.Warnings, d.notes...)...)
	}
	if m.Metrics != nil {
		m.Metrics.observeAdmission(string(req.Operation), d.result, time.Since(start))
	}
	return resp
}

// patched answers a reservation: the CCM's annotations and ours, a warning
// and an Event per reservation, the CCM's warnings, and the log line.
func (m *ServiceMutator) patched(req admission.Request, svc *corev1.Service, d decision) admission.Response {
	w := request.Written(d.cfg, svc, d.ask, d.reserved)
	written, dhcp, told := w.Set, w.DHCPNote, w.Warnings
	maps.Copy(written, d.set)
	resp := patchAnnotations(svc, req.Object.Raw, written, w.Remove)
	warnings := make([]string, 0, len(d.reserved)+len(told))
	var held []heldEvent
	for _, r := range d.reserved {
		warnings = append(warnings, reservedWarning(r))
		e := heldEvent{id: r.ID, eventtype: corev1.EventTypeNormal, reason: EventIPReserved, action: "Reserve",
			note: fmt.Sprintf("reserved %s (IPAM ID %s) from pool %s%s", r.Address, r.ID, r.Pool, dhcp)}
		if r.Reused {
			e.reason, e.note = EventIPReused, "reused"+strings.TrimPrefix(e.note, "reserved")
			if r.AdoptedFrom != "" {
				e.note = fmt.Sprintf("adopted %s (IPAM ID %s) of pool %s from cluster %s%s", r.Address, r.ID, r.Pool, r.AdoptedFrom, dhcp)
			}
		}
		if req.Operation == admissionv1.Create {
			held = append(held, e)
			continue
		}
		m.event(svc, e.eventtype, e.reason, e.action, "%s", e.note)
	}
	if len(held) > 0 {
		m.held.hold(d.key, time.Now(), held)
	}
	warnings = append(warnings, told...)
	m.Log.Info(logVerb(d.reserved), "service", d.key, "addresses", written[request.AnnotationAddresses], "ids", written[ccm.AnnotationPrivateIPIDs])
	return resp.WithWarnings(warnings...)
}

func (m *ServiceMutator) event(svc *corev1.Service, eventtype, reason, action, note string, args ...any) {
	if m.Recorder != nil {
		m.Recorder.Eventf(svc, nil, eventtype, reason, action, note, args...)
	}
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
			after := int32(retryAfterSeconds)
			if ie.RetryAfter > 0 {
				after = int32((ie.RetryAfter + time.Second - 1) / time.Second)
			}
			resp.Result.Details = &metav1.StatusDetails{RetryAfterSeconds: after}
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

// patchAnnotations sets annotations on the raw object, removes those of
// remove it carries, and answers with the patch. It edits the JSON as it came rather than a re-encoded Service: a
// typed round trip would drop fields this build does not know (a newer
// apiserver's), and the patch would remove them.
func patchAnnotations(svc *corev1.Service, raw []byte, set map[string]string, remove []string) admission.Response {
	if svc.Annotations != nil {
		// The object has annotations: an operation per key that changes,
		// the patch a diff of the whole object would give, without
		// decoding, encoding and diffing it.
		var ops []jsonpatch.JsonPatchOperation
		for _, k := range slices.Sorted(maps.Keys(set)) {
			op := "add"
			if old, ok := svc.Annotations[k]; ok {
				if old == set[k] {
					continue
				}
				op = "replace"
			}
			ops = append(ops, jsonpatch.NewOperation(op, "/metadata/annotations/"+pointerEscape.Replace(k), set[k]))
		}
		for _, k := range remove {
			if _, ok := svc.Annotations[k]; ok {
				ops = append(ops, jsonpatch.NewOperation("remove", "/metadata/annotations/"+pointerEscape.Replace(k), nil))
			}
		}
		return admission.Patched("", ops...)
	}
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

// pointerEscape escapes a key for a JSON Pointer (RFC 6901).
var pointerEscape = strings.NewReplacer("~", "~0", "/", "~1")

func reservedWarning(r *ipam.Grant) string {
	switch {
	case r.BringYourOwn:
		return fmt.Sprintf("scw-lb-ipam: using %s (IPAM ID %s, pool %s), validated; it was reserved outside scw-lb-ipam and will never be released by it", r.Address, r.ID, r.Pool)
	case r.AdoptedFrom != "":
		return fmt.Sprintf("scw-lb-ipam: adopted %s (IPAM ID %s) of pool %s from cluster %s, which held it for this Service; the Load Balancer gets it once cluster %s's lets go", r.Address, r.ID, r.Pool, r.AdoptedFrom, r.AdoptedFrom)
	case r.Reused:
		return fmt.Sprintf("scw-lb-ipam: reused %s (IPAM ID %s) from pool %s, retained for this Service", r.Address, r.ID, r.Pool)
	}
	return fmt.Sprintf("scw-lb-ipam: reserved %s (IPAM ID %s) from pool %s", r.Address, r.ID, r.Pool)
}

func logVerb(rs []*ipam.Grant) string {
	for _, r := range rs {
		if !r.Reused {
			return "reserved"
		}
	}
	return "reused"
}

func dryRunWarnings(rs []*ipam.Grant) []string {
	out := make([]string, 0, len(rs))
	for _, r := range rs {
		addr := "an address IPAM chooses"
		if r.Address.IsValid() {
			addr = r.Address.String()
		}
		switch {
		case r.ID != "" && r.AdoptedFrom != "":
			out = append(out, fmt.Sprintf("scw-lb-ipam: dry run: would adopt %s (IPAM ID %s) of pool %s from cluster %s; nothing was changed", addr, r.ID, r.Pool, r.AdoptedFrom))
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

// Metrics of the admission webhook, registered once per process.
type Metrics struct {
	admissions *prometheus.CounterVec
	latency    *prometheus.HistogramVec
}

// NewMetrics creates and registers the admission metrics.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		admissions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "scw_lb_ipam_admissions_total",
			Help: "Service admissions by operation and result (skipped, patched, allowed, restored, dry_run, denied, errored).",
		}, []string{"operation", "result"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "scw_lb_ipam_admission_duration_seconds",
			Help:    "Time to answer a Service admission, Scaleway calls included.",
			Buckets: []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"operation"}),
	}
	reg.MustRegister(m.admissions, m.latency)
	return m
}

func (m *Metrics) observeAdmission(op, result string, d time.Duration) {
	m.admissions.WithLabelValues(op, result).Inc()
	m.latency.WithLabelValues(op).Observe(d.Seconds())
}

// heldEventsTTL bounds how long the Events of an admitted CREATE wait for
// their Service: a create that another admission plugin or etcd refused
// after this webhook answered never shows one.
const heldEventsTTL = time.Minute

// creationSlack allows for the apiserver's whole-second creation
// timestamps and clock skew between it and this replica. The IDs the
// Service references, not the time, tell the Service the Events are about.
const creationSlack = 10 * time.Second

// heldEvents keeps the Events of admitted CREATEs until the Service exists.
// At a CREATE admission the Service has no UID yet: an Event about it would
// carry none, and `kubectl describe` selects a Service's Events by UID, so
// it would never show them; and a create refused after this webhook
// answered would leave an Event about a Service that never existed. The
// replica that admitted records them when its Service informer sees the
// Service (seen), with the Service's UID, which also keeps the Event's
// write out of the create it describes. Per Service name only the latest
// admission's Events are held: a retried create speaks once, of what the
// Service got.
type heldEvents struct {
	mu    sync.Mutex
	byKey map[types.NamespacedName]heldAdmission
}

// heldAdmission is one admission's Events, one per reservation.
type heldAdmission struct {
	at     time.Time
	events []heldEvent
}

type heldEvent struct {
	// id is the IPAM ID the Event is about: it is recorded only on a
	// Service that references it.
	id                        string
	eventtype, reason, action string
	note                      string
}

// hold keeps the Events of an admission of the Service key made at time
// at, in place of any held before for that name, and forgets those past
// heldEventsTTL.
func (h *heldEvents) hold(key types.NamespacedName, at time.Time, es []heldEvent) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.byKey == nil {
		h.byKey = map[types.NamespacedName]heldAdmission{}
	}
	h.expire(at)
	h.byKey[key] = heldAdmission{at: at, events: es}
}

func (h *heldEvents) expire(now time.Time) {
	for k, a := range h.byKey {
		if now.Sub(a.at) > heldEventsTTL {
			delete(h.byKey, k)
		}
	}
}

// take returns, at time now, the Events held for svc that are about it: it
// is not being deleted, was created around or after the admission (not an
// older incarnation of the name), and references the Event's IPAM ID (not
// a namesake that another admission, or none, gave other IPs).
func (h *heldEvents) take(svc *servicecache.Record, now time.Time) []heldEvent {
	key := svc.Key()
	h.mu.Lock()
	defer h.mu.Unlock()
	h.expire(now)
	a, ok := h.byKey[key]
	if !ok || svc.UID == "" || svc.Deleting() || svc.CreatedAt().Before(a.at.Add(-creationSlack)) {
		return nil
	}
	delete(h.byKey, key)
	ids := svc.ReferencedIDs()
	var out []heldEvent
	for _, e := range a.events {
		if slices.Contains(ids, e.id) {
			out = append(out, e)
		}
	}
	return out
}

// seen records the Events held for svc, now that it exists (the Service
// informer's handler calls it).
func (m *ServiceMutator) seen(svc *servicecache.Record) {
	for _, e := range m.held.take(svc, time.Now()) {
		m.event(svc.Regarding(), e.eventtype, e.reason, e.action, "%s", e.note)
	}
}
