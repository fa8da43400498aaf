package chaos

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/scw-lb-ipam/scw-lb-ipam/test/testenv"
)

// keyRotation rotates the webhook's API key halfway through the
// operations, as docs/security.md says (the new key in the Secret, the old
// one revoked once every serving replica signs with the new one), while
// the clients, the churn, the faults and the kills go on. No Scaleway call
// may be refused and no admission denied for the key.
type keyRotation struct {
	env   *testenv.Env
	done  *atomic.Int64
	total int

	at  int64 // operations done when it began
	rot testenv.KeyRotation
	err error
}

func (k *keyRotation) run(ctx context.Context) {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for k.done.Load() < int64(k.total/2) {
		select {
		case <-ctx.Done():
			k.err = fmt.Errorf("the run ended at operation %d, before the rotation", k.done.Load())
			return
		case <-tick.C:
		}
	}
	k.at = k.done.Load()
	k.rot, k.err = k.env.RotateKey(time.Minute)
}

// refused counts the Scaleway calls answered 401 or 403: the faults
// inject neither, and the CCM's key is never revoked.
func (k *keyRotation) refused() int {
	n := 0
	for _, req := range k.env.Emu.Requests() {
		if req.Status == http.StatusUnauthorized || req.Status == http.StatusForbidden {
			n++
		}
	}
	return n
}

func (k *keyRotation) check(t *testing.T, r *run) {
	t.Helper()
	if k.err != nil {
		t.Errorf("key rotation: %v", k.err)
	}
	if n := k.refused(); n != 0 {
		t.Errorf("key rotation: %d Scaleway calls refused (401/403)", n)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if n := r.denials[keyRefusedReason]; n != 0 {
		t.Errorf("key rotation: %d admissions denied for the key", n)
	}
}

func (k *keyRotation) summary() string {
	return fmt.Sprintf("  key rotation at operation %d: %s → %s, every serving replica signing with the new key %s after the Secret changed, then the old key revoked; Scaleway calls refused (401/403) over the run: %d\n",
		k.at, k.rot.Old, k.rot.New, k.rot.InUse.Round(time.Millisecond), k.refused())
}

// keyRefusedReason is the denial of an admission whose Scaleway call was
// refused for the key.
const keyRefusedReason = "Scaleway API key refused"
