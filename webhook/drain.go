package webhook

import "net/http"

// closeWhileDraining answers every request served once draining holds with
// Connection: close, so that the client drops its connection after the
// answer instead of pooling it: the apiserver keeps a keep-alive connection
// to a replica after its endpoint is gone (the Service's ClusterIP routes
// an established connection to the same pod), and an admission written on
// it after the replica stopped listening fails ("broken pipe"). Over
// HTTP/2, net/http turns the header into a GOAWAY.
func closeWhileDraining(next http.Handler, draining func() bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if draining() {
			w.Header().Set("Connection", "close")
		}
		next.ServeHTTP(w, r)
	})
}
