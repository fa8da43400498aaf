package scaleway

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// retryHint carries a Retry-After header from the transport to retry: the
// SDK's errors do not keep response headers.
type retryHint struct {
	mu    sync.Mutex
	after time.Duration
}

type retryHintKey struct{}

func (h *retryHint) set(d time.Duration) { h.mu.Lock(); h.after = d; h.mu.Unlock() }

func (h *retryHint) take() time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	d := h.after
	h.after = 0
	return d
}

// observingClient is the SDK's HTTP client: it reports every call to the
// observer and hands Retry-After to the retry loop. Hand-written rather than
// promhttp.InstrumentRoundTripperCounter/Duration: those record only calls
// that got an answer, under a label named code, while
// scw_lb_ipam_scaleway_calls_total{operation,status} also counts the calls
// that got none, as status 0, which is what shows an unreachable API.
//
// With a Key, it also signs each call with the key in use, and tells the
// key what the API answered.
type observingClient struct {
	next    *http.Client
	observe CallObserver
	key     *Key
}

func (o *observingClient) Do(req *http.Request) (*http.Response, error) {
	resp, gen, err := o.send(req)
	if err == nil && resp.StatusCode == http.StatusUnauthorized && o.key != nil && o.key.stale(gen) && (req.Body == nil || req.GetBody != nil) {
		// Signed with a key replaced since: sent again with the one in
		// use, as the caller would have sent it a moment later.
		again := req.Clone(req.Context())
		if req.GetBody != nil {
			if again.Body, err = req.GetBody(); err != nil {
				return resp, nil
			}
		}
		_ = resp.Body.Close()
		resp, _, err = o.send(again)
	}
	return resp, err
}

// send makes one call, signed with the key in use (the generation it
// returns), and reports it.
func (o *observingClient) send(req *http.Request) (*http.Response, int, error) {
	gen := 0
	if o.key != nil {
		gen = o.key.sign(req)
	}
	start := time.Now()
	resp, err := o.next.Do(req)
	status, errType := 0, ""
	if err == nil {
		status = resp.StatusCode
		if ra := resp.Header.Get("Retry-After"); ra != "" {
			if secs, perr := strconv.Atoi(ra); perr == nil && secs >= 0 {
				if h, ok := req.Context().Value(retryHintKey{}).(*retryHint); ok {
					h.set(time.Duration(secs) * time.Second)
				}
			}
		}
		if status == http.StatusUnauthorized || status == http.StatusForbidden {
			errType = peekErrorType(resp)
		}
	}
	op := operation(req)
	if o.key != nil {
		o.key.answered(op, gen, status, errType)
	}
	if o.observe != nil {
		o.observe(op, status, time.Since(start))
	}
	return resp, gen, err
}

// peekErrorType reads the type of an error body and puts the body back
// for the SDK: a 403 is IAM's refusal (permissions_denied,
// authorization_required) or a quota's (quotas_exceeded).
func peekErrorType(resp *http.Response) string {
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(b))
	if err != nil {
		return ""
	}
	var body struct {
		Type string `json:"type"`
	}
	_ = json.Unmarshal(b, &body)
	return body.Type
}

// operation names a Scaleway call for metrics from its method and path.
func operation(req *http.Request) string {
	p := req.URL.Path
	switch {
	case req.Method == http.MethodPost && strings.HasSuffix(p, "/ips"):
		return "BookIP"
	case req.Method == http.MethodGet && strings.HasSuffix(p, "/ips"):
		return "ListIPs"
	case req.Method == http.MethodGet && strings.Contains(p, "/ips/"):
		return "GetIP"
	case req.Method == http.MethodPatch && strings.Contains(p, "/ips/"):
		return "UpdateIP"
	case req.Method == http.MethodDelete && strings.Contains(p, "/ips/"):
		return "ReleaseIP"
	case req.Method == http.MethodGet && strings.Contains(p, "/private-networks/"):
		return "GetPrivateNetwork"
	case p == "/metadata":
		return "Metadata"
	}
	return req.Method + " other"
}
