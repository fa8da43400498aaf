package scalewaytest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
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
	Interactions []struct {
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
	} `json:"interactions"`
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

func (r *replayer) run(cas *cassette) {
	for _, it := range cas.Interactions {
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
			continue
		}
		r.apis[api]++
		r.replayed++
		r.atRecordedTime(it.Response.Headers)
		r.beforeLBCall(it.Request.Method, u.Path, it.Response.Code)

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
		if resp.StatusCode != it.Response.Code {
			r.errorf("status %d, recorded %d (emulator body %s)", resp.StatusCode, it.Response.Code, got)
			continue
		}
		r.values++
		r.fields["(status)"]++
		if it.Response.Body == "" {
			if len(got) != 0 {
				r.errorf("body %s, recorded none", got)
			}
			continue
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
			continue
		}
		r.compare("", recorded, emulated)
	}
}

// rewrite replaces the recorded IDs of a URL or body with the emulator's.
func (r *replayer) rewrite(s string) string {
	for rec, emu := range r.ids {
		s = strings.ReplaceAll(s, rec, emu)
	}
	return s
}

// addedSinceOlderRecordings are keys the API grew after the older
// recordings (2025-06 to 2026-03) were made: the newest one
// (tf-list-ipam-ips-basic, 2026-08) shows them, and the emulator answers as
// the newest API does. Any other key the recordings lack is an error.
func addedSinceOlderRecordings(path string) bool {
	for _, p := range []string{
		"s3_integration_enabled", // VPC
		"transitivity_enabled",   // VPC
		"has_s3_integration",     // Private Network
		"subnets[].region",       // subnet of a Private Network
	} {
		if path == p || strings.HasSuffix(path, "."+p) {
			return true
		}
	}
	return false
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func jsonType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case map[string]any:
		return "object"
	case []any:
		return "array"
	case string:
		return "string"
	case float64:
		return "number"
	case bool:
		return "bool"
	}
	return fmt.Sprintf("%T", v)
}

// compare checks emu against rec: every recorded key is there with the same
// JSON type, recursively, no key is added, and leaf values agree.
func (r *replayer) compare(path string, rec, emu any) {
	r.t.Helper()
	if jsonType(rec) != jsonType(emu) {
		r.errorf("%s: %s (%v), recorded %s (%v)", orRoot(path), jsonType(emu), emu, jsonType(rec), rec)
		return
	}
	switch rv := rec.(type) {
	case map[string]any:
		ev := emu.(map[string]any)
		keys := slices.Sorted(func(yield func(string) bool) {
			for k := range rv {
				if !yield(k) {
					return
				}
			}
		})
		for _, k := range keys {
			e, ok := ev[k]
			if !ok {
				r.errorf("%s: missing", join(path, k))
				continue
			}
			r.compare(join(path, k), rv[k], e)
		}
		for k := range ev {
			if _, ok := rv[k]; !ok && !addedSinceOlderRecordings(join(path, k)) {
				r.errorf("%s: not in the recording", join(path, k))
			}
		}
	case []any:
		ev := emu.([]any)
		if r.instanceBeingAssigned(path, rv, ev) {
			return
		}
		if len(ev) != len(rv) {
			r.errorf("%s: %d elements, recorded %d", orRoot(path), len(ev), len(rv))
			return
		}
		// The length is a value: how many IPs a list has, how many tags.
		r.values++
		r.fields[strings.TrimSuffix(path[strings.LastIndex(path, ".")+1:], "[]")+"[]"]++
		for i := range rv {
			r.compare(path+"[]", rv[i], ev[i])
		}
	default:
		r.leaf(path, rec, emu)
	}
}

func orRoot(path string) string {
	if path == "" {
		return "(body)"
	}
	return path
}

func (r *replayer) leaf(path string, rec, emu any) {
	r.t.Helper()
	key := strings.TrimSuffix(path[strings.LastIndex(path, ".")+1:], "[]")
	rs, isString := rec.(string)
	if r.lbLeaf(path, key, rec, emu) {
		return
	}
	switch {
	case key == "created_at" || key == "updated_at":
		// Generated: same layout, any value.
		if !r.stamp.MatchString(rs) || !r.stamp.MatchString(emu.(string)) {
			r.errorf("%s: %v, recorded %v: not the API's timestamp layout", path, emu, rec)
		}
		r.stamps++
	case key == "organization_id":
		// The account's organization is the recording's environment, not
		// something the API under test generates; the emulator uses its
		// own for projects it does not know.
	case key == "custom_routes_propagation_enabled":
		// The API changed this default between recordings: the 2025-06 one
		// creates VPCs without it (then enables it), later ones with it.
		// The emulator follows the later ones.
	case isString && r.uuid.MatchString(rs):
		r.mapID(path, rs, emu.(string))
	case key == "subnet" && isString && strings.Contains(rs, ":"):
		// The IPv6 /64 IPAM adds is random: check it is one.
		p, err := netip.ParsePrefix(emu.(string))
		if err != nil || p.Bits() != 64 || !netip.MustParsePrefix("fd00::/8").Contains(p.Addr()) {
			r.errorf("%s: %v is not a ULA /64 (recorded %v)", path, emu, rec)
		}
		r.values++
		r.fields[key]++
	default:
		if !reflect.DeepEqual(rec, emu) {
			r.errorf("%s: %v, recorded %v", path, emu, rec)
		}
		r.values++
		r.fields[key]++
	}
}

func (r *replayer) mapID(path, rec, emu string) {
	r.t.Helper()
	r.idChecks++
	if !r.uuid.MatchString(emu) {
		r.errorf("%s: %q is not an ID (recorded %s)", path, emu, rec)
		return
	}
	if known, ok := r.ids[rec]; ok {
		if known != emu {
			r.errorf("%s: %s, but recorded %s stands for %s", path, emu, rec, known)
		}
		return
	}
	if other, taken := r.back[emu]; taken {
		r.errorf("%s: %s stands for both recorded %s and %s", path, emu, other, rec)
		return
	}
	r.ids[rec], r.back[emu] = emu, rec
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
