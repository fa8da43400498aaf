package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"sync/atomic"
	"time"

	"gomodules.xyz/jsonpatch/v2"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/scw-lb-ipam/scw-lb-ipam/request"
)

// patching is the no-op that waits where ours waits and answers with a
// patch of ours' shape. Ours waits on one Scaleway call (its BookIP): an
// HTTP request to the emulator, which answers after the emulated latency.
// This no-op makes one such request too (the emulator's metadata, plain
// net/http), so that ours − patch no-op holds what ours adds over a webhook
// that calls the API once: the SDK, the rules, the inventory, the patch's
// computation; not the loopback round trip and the emulator's own answer,
// which stand in for the network and Scaleway. The apiserver decodes the
// patch, applies it and stores the larger object, the same for both. It
// returns the operations and paths of the patch ours answered a Service of
// the same pool with, each value as long as ours'.
type patching struct {
	url    string
	client *http.Client
	shape  []jsonpatch.JsonPatchOperation
	// lengths are the annotations the patch writes, by key, and the length
	// of each value: what a stored Service shows once it is applied.
	lengths map[string]int
	seq     atomic.Uint64
}

func (p *patching) Handle(ctx context.Context, _ admission.Request) admission.Response {
	if err := p.call(ctx); err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	return admission.Patched("", p.ops(p.seq.Add(1))...)
}

// call is the one request the no-op waits on; an error fails the create,
// and the bench with it.
func (p *patching) call(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.url, nil)
	if err != nil {
		return err
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("the patch no-op's call GET %s answered %s", p.url, resp.Status)
	}
	return nil
}

// ops is the patch of the n-th Service.
func (p *patching) ops(n uint64) []jsonpatch.JsonPatchOperation {
	ops := make([]jsonpatch.JsonPatchOperation, len(p.shape))
	for i, op := range p.shape {
		ops[i] = jsonpatch.JsonPatchOperation{Operation: op.Operation, Path: op.Path, Value: stamp(op.Value.(string), n)}
	}
	return ops
}

// stamp is tmpl with its hex digits, from the right, replaced by the
// decimal digits of n, zeros beyond: as many bytes and separators as ours'
// value, distinct for each Service, and equal to no real ID (a random
// UUID's version digit is 4) nor address (ours start 172): the burst's
// duplicate count and the sweeper see no Service share another's IP.
func stamp(tmpl string, n uint64) string {
	out := []byte(tmpl)
	for i := len(out) - 1; i >= 0; i-- {
		c := out[i]
		if '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F' {
			out[i] = byte('0' + n%10)
			n /= 10
		}
	}
	return string(out)
}

// newPatching creates a Service through ours, in the pool the latency
// rows ask for, and takes the patch ours answered it with: ours writes
// annotations only, and the difference of the annotations as sent and as
// stored, diffed by the function ours answers with, is its patch.
func (r *report) newPatching() *patching {
	if err := r.env.RestartWebhook(nil); err != nil {
		r.b.Fatal(err)
	}
	sent := map[string]string{request.AnnotationPool: "dc-link"}
	s := svc("opted", "lat-patch-shape", maps.Clone(sent))
	if err := r.kube.Create(context.Background(), s); err != nil {
		r.b.Fatal(err)
	}
	asJSON := func(ann map[string]string) []byte {
		raw, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": ann}})
		if err != nil {
			r.b.Fatal(err)
		}
		return raw
	}
	resp := admission.PatchResponseFromRaw(asJSON(sent), asJSON(s.Annotations))
	p := &patching{url: r.env.Emu.URL() + "/metadata", client: &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()},
		shape: resp.Patches, lengths: map[string]int{}}
	for k, v := range s.Annotations {
		if _, ok := sent[k]; !ok {
			p.lengths[k] = len(v)
		}
	}
	for _, op := range p.shape {
		if _, ok := op.Value.(string); !ok {
			r.b.Fatalf("ours' patch holds %s %s with a value that is not a string (%T): the patch no-op replays annotations only", op.Operation, op.Path, op.Value)
		}
	}
	if len(p.shape) == 0 || len(p.shape) != len(p.lengths) {
		r.b.Fatalf("ours' patch of %s has %d operations for %d annotations written (%v)", s.Name, len(p.shape), len(p.lengths), s.Annotations)
	}
	return p
}

// applied fails unless the stored Service carries every annotation of the
// patch, as long as ours writes it: the apiserver applied the patch, so
// the rows compare ours with a webhook whose patch was applied too.
func (p *patching) applied(s *corev1.Service) error {
	for k, n := range p.lengths {
		if v, ok := s.Annotations[k]; !ok || len(v) != n {
			return fmt.Errorf("the patch no-op's Service %s/%s: annotation %s is %q, want %d bytes", s.Namespace, s.Name, k, v, n)
		}
	}
	return nil
}

// size is the patch's operations and its bytes as the webhook sends them.
func (p *patching) size() (ops, bytes int) {
	raw, _ := json.Marshal(p.ops(0))
	return len(p.shape), len(raw)
}

// patchRows prints ours over the patch no-op, each against its paired
// un-webhooked creates, as ours − waiting no-op is: less what ours' calls
// waited beyond the no-op's one latency. At 20 ms it checks the goal.
func (r *report) patchRows(lat, emulated time.Duration, bl map[string]*pairedBlocks) {
	d, lo, hi := pairedDiff(bl["ours"], bl["patch"])
	adj := lat - emulated
	d, lo, hi = d+adj, lo+adj, hi+adj
	line := fmt.Sprintf("  %-10s %-50s %10s", "", "ours − patch no-op (p50; 90% interval "+ms(lo)+" … "+ms(hi)+")", ms(d))
	if lat == 20*time.Millisecond {
		line += "   " + r.checkInterval("at 20 ms emulated latency, ours p50 ≤ the patch no-op's p50 + 1 ms (met or missed when the 90% interval of ours − patch no-op, each against its paired un-webhooked creates, is)",
			lo, hi, time.Millisecond, fmt.Sprintf("%s, 90%% interval %s … %s", ms(d), ms(lo), ms(hi)))
	}
	r.printf("%s\n", line)
	fwd, rev := turnMeans(bl["ours"], bl["patch"])
	r.printf("  %-10s %-50s %10s / %s\n", "", "  in rounds where patch no-op follows ours / precedes it", ms(fwd+adj), ms(rev+adj))
	pd, plo, phi := pairedDiff(bl["patch"], bl["wait"])
	r.printf("  %-10s %-50s %10s   (90%% interval %s … %s)\n", "", "  its call and patch (patch no-op − waiting no-op)", ms(pd), ms(plo), ms(phi))
}
