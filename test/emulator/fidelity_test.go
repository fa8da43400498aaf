package emulator

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/yaml"
)

// The fidelity test replays real Scaleway traffic, recorded by the
// terraform provider's test suite (go-vcr cassettes), against the emulator
// and checks that it answers as the real API did: same status, same JSON
// shape, same values for everything the API does not generate. The Load
// Balancer recordings (lb/) are replayed on the recording's own clock;
// what the real API itself answers at random within a second, or generates,
// is compared as fidelity_lb_test.go says.

// cassette is the part of a go-vcr v2 cassette the replay reads.
type cassette struct {
	Interactions []interaction `json:"interactions"`
}

// interaction is one recorded call and its answer.
type interaction struct {
	ID      int `json:"id"`
	Request struct {
		Body    string              `json:"body"`
		Headers map[string][]string `json:"headers"`
		URL     string              `json:"url"`
		Method  string              `json:"method"`
	} `json:"request"`
	Response struct {
		Body    string              `json:"body"`
		Headers map[string][]string `json:"headers"`
		Code    int                 `json:"code"`
	} `json:"response"`
}

// recordingsDir finds shared/scaleway-recordings in the working directory
// or one of its parents (from this package: ../../../../shared/…).
func recordingsDir(t *testing.T) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		cand := filepath.Join(dir, "shared", "scaleway-recordings")
		if st, err := os.Stat(cand); err == nil && st.IsDir() {
			return cand
		}
		if filepath.Dir(dir) == dir {
			break
		}
	}
	t.Skipf("no Scaleway recordings: %s (shared/scaleway-recordings in %s or a parent) is absent",
		filepath.Clean(filepath.Join(wd, "../../../../shared/scaleway-recordings")), wd)
	return ""
}

func TestFidelity(t *testing.T) {
	dir := recordingsDir(t)
	files, err := filepath.Glob(filepath.Join(dir, "*.cassette.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("no cassette in %s", dir)
	}
	sort.Strings(files)
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".cassette.yaml")
		t.Run(name, func(t *testing.T) { replayCassette(t, name, f) })
	}
	// The Load Balancer recordings: the API the real CCM calls.
	lbDir := filepath.Join(dir, "lb")
	lbFiles, err := filepath.Glob(filepath.Join(lbDir, "*.cassette.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(lbFiles) == 0 {
		t.Run("lb", func(t *testing.T) {
			t.Skipf("no Load Balancer recordings: %s is absent or holds no cassette", lbDir)
		})
		return
	}
	sort.Strings(lbFiles)
	for _, f := range lbFiles {
		name := "lb/" + strings.TrimSuffix(filepath.Base(f), ".cassette.yaml")
		t.Run(name, func(t *testing.T) { replayCassette(t, name, f) })
	}
}

// replayCassette replays one recording against a new emulator that keeps
// Scaleway's Load Balancer timings on a clock set, call by call, to the
// recording's own (its Date headers).
func replayCassette(t *testing.T, name, file string) {
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var cas cassette
	if err := yaml.Unmarshal(b, &cas); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	if len(cas.Interactions) == 0 {
		t.Fatalf("%s: no interactions", file)
	}
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	srv := NewTestServer(t, Options{
		SecretKey: testSecretKey, Clock: clk,
		LBCreateDelay: ScalewayLBCreateDelay, LBSettleDelay: ScalewayLBSettleDelay,
		// Deletions are held from the DELETE until the recording shows
		// the Load Balancer gone (see lbDeletions).
		LBDeleteDelay: time.Millisecond,
	})
	r := newReplayer(t, srv)
	r.clock = clk
	r.run(&cas)
	t.Logf("%s: %d interactions replayed (%s), %d fields compared (%d values, %d IDs mapped consistently, %d timestamps), %d distinct IDs; compared: %s",
		name, r.replayed, r.apiSummary(), r.values+r.idChecks+r.stamps, r.values, r.idChecks, r.stamps, len(r.ids), r.fieldSummary())
}

type replayer struct {
	t   *testing.T
	srv *Server
	// ids maps recorded IDs to the emulator's, back the other way: an ID is
	// learned where a recorded body first shows it, from the emulator's
	// body at the same JSON path, and must then stay consistent.
	ids, back map[string]string
	at        string // the interaction being replayed, for messages

	replayed                 int
	apis                     map[string]int
	values, idChecks, stamps int
	fields                   map[string]int

	uuid *regexp.Regexp
	// stamp is the API's timestamp layout: UTC, six fractional digits.
	stamp *regexp.Regexp

	// clock is the emulator's, moved to each recorded answer's Date.
	clock *clocktesting.FakePassiveClock
	// lb follows the Load Balancers' deletions and generated values.
	lb lbReplay
}

func newReplayer(t *testing.T, srv *Server) *replayer {
	return &replayer{
		t: t, srv: srv,
		ids: map[string]string{}, back: map[string]string{},
		apis: map[string]int{}, fields: map[string]int{},
		uuid:  regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`),
		stamp: regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$`),
	}
}

func (r *replayer) errorf(format string, args ...any) {
	r.t.Helper()
	r.t.Errorf("%s: %s", r.at, fmt.Sprintf(format, args...))
}

func apiOf(path string) string {
	switch {
	case strings.HasPrefix(path, "/ipam/"):
		return "ipam"
	case strings.HasPrefix(path, "/vpc/"):
		return "vpc"
	case strings.HasPrefix(path, "/account/"):
		return "account"
	case strings.HasPrefix(path, "/lb/"):
		return "lb"
	case path == "/metadata":
		return "metadata"
	}
	return ""
}

// run replays every interaction of cas in order.
func (r *replayer) run(cas *cassette) {
	for _, it := range cas.Interactions {
		r.replay(it)
	}
}

// replay sends it to the emulator, on the recording's clock, and compares
// the answer with the recorded one.
func (r *replayer) replay(it interaction) {
	u, err := url.Parse(it.Request.URL)
	if err != nil {
		r.t.Fatalf("interaction %d: %v", it.ID, err)
	}
	r.at = fmt.Sprintf("interaction %d (%s %s)", it.ID, it.Request.Method, u.Path)
	api := apiOf(u.Path)
	if api == "" {
		// Nothing the emulator serves: the Instance API's public IPs
		// that a backend recording uses as its servers.
		r.t.Logf("%s: not an API the emulator serves, skipped", r.at)
		r.apis["skipped"]++
		return
	}
	r.apis[api]++
	r.replayed++
	r.atRecordedTime(it.Response.Headers)
	r.beforeLBCall(it.Request.Method, u.Path, it.Response.Code)
	resp, got := r.send(it, u)
	r.check(it, resp, got)
}

// send makes it's request, its recorded IDs rewritten to the emulator's,
// and returns the emulator's answer and body.
func (r *replayer) send(it interaction, u *url.URL) (*http.Response, []byte) {
	target := r.srv.URL() + r.rewrite(u.RequestURI())
	var body io.Reader
	if it.Request.Body != "" {
		body = strings.NewReader(r.rewrite(it.Request.Body))
	}
	req, err := http.NewRequest(it.Request.Method, target, body)
	if err != nil {
		r.t.Fatal(err)
	}
	req.Header.Set("X-Auth-Token", testSecretKey) // stripped from the recordings
	if ct := it.Request.Headers["Content-Type"]; len(ct) > 0 {
		req.Header.Set("Content-Type", ct[0])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		r.t.Fatalf("%s: %v", r.at, err)
	}
	got, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		r.t.Fatal(err)
	}
	return resp, got
}

// check compares the emulator's answer to it, resp with body got, with the
// recorded one: status, Content-Type, and the body as compare does.
func (r *replayer) check(it interaction, resp *http.Response, got []byte) {
	if resp.StatusCode != it.Response.Code {
		r.errorf("status %d, recorded %d (emulator body %s)", resp.StatusCode, it.Response.Code, got)
		return
	}
	r.values++
	r.fields["(status)"]++
	if it.Response.Body == "" {
		if len(got) != 0 {
			r.errorf("body %s, recorded none", got)
		}
		return
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		r.errorf("Content-Type %q", ct)
	}
	var recorded, emulated any
	if err := json.Unmarshal([]byte(it.Response.Body), &recorded); err != nil {
		r.t.Fatalf("%s: recorded body: %v", r.at, err)
	}
	if err := json.Unmarshal(got, &emulated); err != nil {
		r.errorf("emulator body %q: %v", got, err)
		return
	}
	r.compare("", recorded, emulated)
}

// rewrite replaces the recorded IDs of a URL or body with the emulator's.
func (r *replayer) rewrite(s string) string {
	for rec, emu := range r.ids {
		s = strings.ReplaceAll(s, rec, emu)
	}
	return s
}

func (r *replayer) apiSummary() string {
	var parts []string
	for _, api := range []string{"ipam", "vpc", "account", "lb", "metadata", "skipped"} {
		if n := r.apis[api]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", api, n))
		}
	}
	return strings.Join(parts, ", ")
}

func (r *replayer) fieldSummary() string {
	keys := make([]string, 0, len(r.fields))
	for k := range r.fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s×%d", k, r.fields[k])
	}
	return strings.Join(parts, " ")
}
