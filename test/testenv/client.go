package testenv

import (
	"sync"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Warnings collects the apiserver's warnings (admission warnings among
// them) for a client: set it as rest.Config.WarningHandler.
type Warnings struct {
	mu   sync.Mutex
	list []string
}

// HandleWarningHeader implements rest.WarningHandler.
func (w *Warnings) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.list = append(w.list, text)
}

// List returns the warnings so far.
func (w *Warnings) List() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.list...)
}

// Client is a client of the apiserver that reports its warnings to w (nil:
// none) and is not throttled on the client side, for load.
func (e *Env) Client(w rest.WarningHandler) (client.Client, error) {
	cfg := rest.CopyConfig(e.Config)
	if w != nil {
		cfg.WarningHandler = w
	}
	cfg.QPS, cfg.Burst = 1000, 2000
	return client.New(cfg, client.Options{Scheme: e.Kube.Scheme()})
}
