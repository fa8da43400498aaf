package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/allocator"
	"github.com/scw-lb-ipam/scw-lb-ipam/request"
	"github.com/scw-lb-ipam/scw-lb-ipam/servicecache"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/emulator"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/fixtures"
)

// harness runs the mutator behind a real HTTP server, the way the apiserver
// calls it, with the allocator talking to the emulator through the SDK.
type harness struct {
	*fixtures.World
	url     string
	events  *recordedEvents
	alloc   *allocator.Allocator
	mutator *ServiceMutator
}

// The pool file of the handler tests, over five Private Networks.
const harnessPools = `
clusterName: test
region: fr-par
clusterPrivateNetworkID: "{{nodes}}"
pools:
  - {name: dc-link, privateNetworkID: "{{dc}}", ranges: ["172.16.35.200-172.16.35.203"], namespaces: ["payments", "edge-*"]}
  - {name: general, privateNetworkID: "{{edge}}", default: true}
  - {name: manual, privateNetworkID: "{{lab}}", ranges: ["10.30.0.0/24"], autoAssign: false}
  - {name: drained, privateNetworkID: "{{old}}", disabled: true}
  - {name: v6, privateNetworkID: "{{dc}}", ipFamily: IPv6}
  - {name: dc-other, privateNetworkID: "{{dc}}", ranges: ["172.16.34.10-172.16.34.20"]}
  - {name: ephemeral, privateNetworkID: "{{tmp}}", retention: "0", namespaces: ["edge-*"]}
`

func newHarness(t testing.TB) *harness {
	t.Helper()
	h := &harness{events: &recordedEvents{}}
	h.World = fixtures.NewWorld(t, fixtures.WorldOptions{
		Emulator:   emulator.Options{ProjectID: fixtures.Project, SecretKey: emulator.TestSecretKey},
		PNs:        []string{"nodes=172.16.0.0/22", "dc=172.16.32.0/22", "edge=10.10.0.0/24", "lab=10.30.0.0/24", "old=10.40.0.0/24", "tmp=10.50.0.0/24"},
		PoolFile:   harnessPools,
		Namespaces: map[string]bool{"payments": true, "web": true, "edge-eu": true, "plain": false, "kube-system": true, "scw-lb-ipam": true},
	})
	// The release protocol of a 10 s webhook timeout: a 20 s margin.
	h.alloc = fixtures.Must(allocator.New(allocator.Options{Cloud: h.Cloud, Config: h.Cfg, References: fixtures.Records(h.Kube),
		Retention: ipam.Retention{PendingGrace: 10 * time.Minute, Margin: 20 * time.Second}, Claims: allocator.NoClaims{}}))
	// Steady state, as Start keeps it: the pools' subnets listed, the
	// reservation index built.
	if err := h.alloc.Inventory().Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	h.Srv.ResetCounts()
	m := &ServiceMutator{
		Allocator:  h.alloc,
		Namespaces: h.Kube,
		Excluded:   []string{"kube-system", "scw-lb-ipam"},
		Recorder:   h.events,
		Log:        logr.Discard(),
	}
	h.mutator = m
	hook := &admission.Webhook{Handler: m}
	web := httptest.NewServer(WithAdmissionDeadline(hook, DefaultAdmissionTimeout))
	t.Cleanup(web.Close)
	h.url = web.URL
	return h
}

// review is an AdmissionReview as the apiserver sends it.
func review(op admissionv1.Operation, obj, old *corev1.Service, dryRun bool) []byte {
	raw := func(s *corev1.Service) runtime.RawExtension {
		if s == nil {
			return runtime.RawExtension{}
		}
		b, _ := json.Marshal(s)
		return runtime.RawExtension{Raw: b}
	}
	ar := admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID:       "d1c8a9e2-0000-4000-8000-000000000001",
			Kind:      metav1.GroupVersionKind{Version: "v1", Kind: "Service"},
			Resource:  metav1.GroupVersionResource{Version: "v1", Resource: "services"},
			Namespace: obj.Namespace,
			Name:      obj.Name,
			Operation: op,
			Object:    raw(obj),
			OldObject: raw(old),
			DryRun:    &dryRun,
		},
	}
	b, _ := json.Marshal(ar)
	return b
}

// send posts a body and returns the decoded review response.
func (h *harness) send(body []byte) (*admissionv1.AdmissionResponse, int) {
	h.T.Helper()
	r, status, err := h.sendRaw(body)
	if err != nil {
		h.T.Fatal(err)
	}
	if r == nil {
		h.T.Fatalf("not an AdmissionReview answer (HTTP %d)", status)
	}
	h.persisted(body, r)
	return r, status
}

// persisted shows the mutator's Service informer an admitted CREATE's
// Service as the apiserver persists it (a UID, a creation time): the
// Events held for it are recorded then (heldEvents).
func (h *harness) persisted(body []byte, r *admissionv1.AdmissionResponse) {
	var ar admissionv1.AdmissionReview
	if err := json.Unmarshal(body, &ar); err != nil || ar.Request == nil || ar.Request.Operation != admissionv1.Create ||
		(ar.Request.DryRun != nil && *ar.Request.DryRun) || !r.Allowed {
		return
	}
	var svc corev1.Service
	if err := json.Unmarshal(ar.Request.Object.Raw, &svc); err != nil {
		return
	}
	out := fixtures.Patched(h.T, &svc, r.Patch)
	out.UID, out.CreationTimestamp = types.UID("uid-"+out.Name), metav1.Now()
	h.mutator.seen(servicecache.NewRecord(out))
}

// sendRaw is send for any body: the response is nil when the answer is not
// an AdmissionReview.
func (h *harness) sendRaw(body []byte) (*admissionv1.AdmissionResponse, int, error) {
	resp, err := http.Post(h.url+"/mutate?timeout=10s", "application/json", bytes.NewReader(body))
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var ar admissionv1.AdmissionReview
	if err := json.Unmarshal(data, &ar); err != nil || ar.Response == nil {
		return nil, resp.StatusCode, nil
	}
	return ar.Response, resp.StatusCode, nil
}

// patchOps decodes a response's JSON patch, sorted by path.
func patchOps(t testing.TB, r *admissionv1.AdmissionResponse) []jsonpatch.Operation {
	t.Helper()
	if len(r.Patch) == 0 {
		return nil
	}
	var ops []jsonpatch.Operation
	if err := json.Unmarshal(r.Patch, &ops); err != nil {
		t.Fatalf("patch: %v", err)
	}
	sort.Slice(ops, func(i, j int) bool { return ops[i].Path < ops[j].Path })
	return ops
}

// addOps are the three annotation additions of a reservation onto a
// Service that already has annotations.
func addOps(ids, pnIDs, addrs string) []jsonpatch.Operation {
	return []jsonpatch.Operation{
		{Operation: "add", Path: "/metadata/annotations/scw-lb-ipam.io~1addresses", Value: addrs},
		{Operation: "add", Path: "/metadata/annotations/service.beta.kubernetes.io~1scw-loadbalancer-pn-ids", Value: pnIDs},
		{Operation: "add", Path: "/metadata/annotations/service.beta.kubernetes.io~1scw-loadbalancer-private-ip-ids", Value: ids},
	}
}

// store records an admitted Service in the cache, as the apiserver would
// persist it, so that later admissions see it as live.
func (h *harness) store(svc *corev1.Service, r *admissionv1.AdmissionResponse) *corev1.Service {
	h.T.Helper()
	out := fixtures.Patched(h.T, svc, r.Patch)
	out.ResourceVersion = ""
	if err := h.Kube.Create(context.Background(), out); err != nil {
		h.T.Fatal(err)
	}
	// The apiserver sends objects with their kind; the fake client strips it.
	out.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Service"}
	return out
}

// ipByAddress finds the emulator's IP at an address.
func (h *harness) ipByAddress(addr string) (id string, tags []string) {
	for _, ip := range h.Srv.IPs() {
		if strings.HasPrefix(ip.Address.String(), addr+"/") {
			return ip.ID, ip.Tags
		}
	}
	h.T.Fatalf("no IP at %s", addr)
	return "", nil
}

// recordedEvents keeps the events the mutator records.
type recordedEvents struct {
	mu    sync.Mutex
	list  []string
	notes []string
	uids  []types.UID
}

func (r *recordedEvents) Eventf(regarding, _ runtime.Object, eventtype, reason, _, note string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	svc := regarding.(*corev1.Service)
	r.list = append(r.list, eventtype+" "+reason+" "+svc.Namespace+"/"+svc.Name)
	r.notes = append(r.notes, fmt.Sprintf(note, args...))
	r.uids = append(r.uids, svc.UID)
}

// takeNotes returns the Events' notes so far.
func (r *recordedEvents) takeNotes() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.notes
	r.notes = nil
	return out
}

func (r *recordedEvents) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.list
	r.list, r.uids = nil, nil
	return out
}

// unreserved asks the sweeper's question about svc (request.Unreserved)
// with the mutator's namespaces, exclusions and pool file.
func (h *harness) unreserved(svc *corev1.Service) (bool, string, error) {
	return request.Unreserved(context.Background(), h.mutator.Allocator.Config(), h.mutator.Namespaces, h.mutator.Excluded, servicecache.NewRecord(svc))
}
