package testenv

import (
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"time"

	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/scaleway"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/emulator"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/localrun"
)

// WebhookKey is the n-th API key of the webhook's own IAM application,
// which Options.RotatableKey gives it: the permission sets the install
// guide grants, on the default Project, apart from the CCM's key.
func WebhookKey(n int) emulator.Key {
	return emulator.Key{
		AccessKey:      fmt.Sprintf("SCWROTATE%011d", n),
		SecretKey:      fmt.Sprintf("%08x-0000-4000-8000-%012x", n, n),
		ProjectIDs:     []string{emulator.DefaultProjectID},
		PermissionSets: scaleway.PermissionSets,
	}
}

// setupKey makes the webhook's first key known to the emulator and writes
// it where the replicas read it (--scaleway-key-dir).
func (e *Env) setupKey() error {
	e.keyDir = filepath.Join(e.tmp, "scaleway-key")
	e.keys = 1
	k := WebhookKey(e.keys)
	e.Emu.AddKey(k)
	return writeKey(e.keyDir, k)
}

func writeKey(dir string, k emulator.Key) error {
	return localrun.WriteSecretVolume(dir, map[string]string{"SCW_ACCESS_KEY": k.AccessKey, "SCW_SECRET_KEY": k.SecretKey})
}

// KeyRotation is what RotateKey did and saw.
type KeyRotation struct {
	Old, New string // access keys
	// InUse is how long after the new key was written every serving
	// replica signed with it, the API accepting it.
	InUse time.Duration
}

// RotateKey rotates the webhook's key as docs/security.md says: a new key
// of the same application in IAM, then in the Secret; once every serving
// replica signs with it and the API accepts it, the old key is revoked.
func (e *Env) RotateKey(timeout time.Duration) (KeyRotation, error) {
	if e.keyDir == "" {
		return KeyRotation{}, fmt.Errorf("the webhook has no key of its own: set Options.RotatableKey")
	}
	old, next := WebhookKey(e.keys), WebhookKey(e.keys+1)
	e.keys++
	e.Emu.AddKey(next)
	began := time.Now()
	if err := writeKey(e.keyDir, next); err != nil {
		return KeyRotation{}, err
	}
	rot := KeyRotation{Old: old.AccessKey, New: next.AccessKey}
	inUse := localrun.Poll(timeout, 100*time.Millisecond, func() bool {
		for _, r := range e.Replicas {
			if !r.Serving() {
				continue // it reads the new key when it starts
			}
			if v, ok := r.Gauge("scw_lb_ipam_scaleway_key_info", "access_key", next.AccessKey); !ok || v != 1 {
				return false
			}
			if r.KeyRefused() {
				return false
			}
		}
		return true
	})
	if !inUse {
		return rot, fmt.Errorf("the replicas did not all sign with the new key %s within %s", next.AccessKey, timeout)
	}
	rot.InUse = time.Since(began)
	e.Emu.RevokeKey(old.SecretKey)
	return rot, nil
}

// KeyInUse is the webhook's key RotateKey last put in use.
func (e *Env) KeyInUse() emulator.Key { return WebhookKey(e.keys) }

// SetKey puts k in IAM and in the replicas' Secret volume, and returns at
// once: a key the API refuses is one a test watches being reported.
func (e *Env) SetKey(k emulator.Key) error {
	if e.keyDir == "" {
		return fmt.Errorf("the webhook has no key of its own: set Options.RotatableKey")
	}
	e.Emu.AddKey(k)
	return writeKey(e.keyDir, k)
}

// Readyz is the replica's /readyz?verbose: its status code and body (0
// when it does not answer).
func (r *Replica) Readyz() (int, string) {
	resp, err := http.Get(r.probe + "?verbose")
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// KeyRefused reports whether the replica says the API refuses its key.
func (r *Replica) KeyRefused() bool {
	for _, f := range r.gather() {
		if f.GetName() != "scw_lb_ipam_scaleway_key_refused" {
			continue
		}
		for _, m := range f.GetMetric() {
			if m.GetGauge().GetValue() != 0 {
				return true
			}
		}
	}
	return false
}
