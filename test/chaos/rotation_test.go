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
// the clients, the churn, the faults and the kills go on. No admission may
// be denied for the key.
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

// refused counts the Scaleway calls answered 401 and 403: the faults
// inject neither, and the CCM's key is never revoked. A 401 is a call
// signed with the old key and answered after its revocation, which the
// transport sends again with the new key; a 403 is never right.
func (k *keyRotation) refused() (unauthorized, forbidden int) {
	for _, req := range k.env.Emu.Requests() {
		switch req.Status {
		case http.StatusUnauthorized:
			unauthorized++
		case http.StatusForbidden:
			forbidden++
		}
	}
	return unauthorized, forbidden
}

// check: no admission denied for the key, no 403, and no serving replica
// reporting its key refused at the end (a 401 answered to the replaced
// key is sent again, and counts for nothing).
func (k *keyRotation) check(t *testing.T, r *run) {
	t.Helper()
	if k.err != nil {
		t.Errorf("key rotation: %v", k.err)
	}
	if _, forbidden := k.refused(); forbidden != 0 {
		t.Errorf("key rotation: %d Scaleway calls answered 403", forbidden)
	}
	for _, rep := range k.env.Replicas {
		if rep.Serving() && rep.KeyRefused() {
			t.Errorf("key rotation: %s reports its key refused", rep.Name)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if n := r.denials[keyRefusedReason]; n != 0 {
		t.Errorf("key rotation: %d admissions denied for the key", n)
	}
}

func (k *keyRotation) summary() string {
	unauthorized, forbidden := k.refused()
	r := k.env.Replicas
	refusing := 0
	for _, rep := range r {
		if rep.Serving() && rep.KeyRefused() {
			refusing++
		}
	}
	return fmt.Sprintf("  key rotation at operation %d: %s → %s, every serving replica signing with the new key %s after the Secret changed, then the old key revoked; "+
		"calls answered 401 (the old key, after its revocation: sent again with the new one, or a killed replica's): %d, 403: %d; replicas reporting their key refused at the end: %d of %d\n",
		k.at, k.rot.Old, k.rot.New, k.rot.InUse.Round(time.Millisecond), unauthorized, forbidden, refusing, len(r))
}

// keyRefusedReason is the denial of an admission whose Scaleway call was
// refused for the key.
const keyRefusedReason = "Scaleway API key refused"
