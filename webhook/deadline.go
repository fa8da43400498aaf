package webhook

import (
	"context"
	"net/http"
	"time"
)

// DefaultAdmissionTimeout is the apiserver's default webhook timeout, used
// when a request carries none.
const DefaultAdmissionTimeout = 10 * time.Second

// WithAdmissionDeadline gives each admission a context deadline shorter than
// the apiserver's own (the ?timeout= it sends, never more than limit), so
// that Scaleway retries stop in time for the webhook to answer with a clear
// denial instead of the apiserver giving up on it. limit also bounds how
// long an admission may take to write what it decided, which the release
// protocol's margin relies on (ipam.Retention).
func WithAdmissionDeadline(next http.Handler, limit time.Duration) http.Handler {
	if limit <= 0 {
		limit = DefaultAdmissionTimeout
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		timeout := limit
		if v := r.URL.Query().Get("timeout"); v != "" {
			if d, err := time.ParseDuration(v); err == nil && d > 0 {
				timeout = min(d, limit)
			}
		}
		ctx, cancel := context.WithTimeout(r.Context(), budget(timeout))
		defer cancel()
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// budget keeps a margin for the answer's trip back: 15% of the timeout, at
// least half a second.
func budget(timeout time.Duration) time.Duration {
	margin := max(timeout*15/100, 500*time.Millisecond)
	return max(timeout-margin, timeout/2)
}
