package scaleway

import (
	"cmp"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/scaleway/scaleway-sdk-go/validation"
)

// The permission sets scw-lb-ipam's key needs, as Scaleway IAM names them.
// IPAM has no narrower set that may book and release.
const (
	IPAMFullAccess          = "IPAMFullAccess"
	PrivateNetworksReadOnly = "PrivateNetworksReadOnly"
)

// PermissionSets are every set the key needs.
var PermissionSets = []string{IPAMFullAccess, PrivateNetworksReadOnly}

// PermissionSet is the set a call of operation op (as the call metrics
// name it) needs: the one a 403 on that call says is missing. Empty for a
// call that needs no key.
func PermissionSet(op string) string {
	switch op {
	case "BookIP", "ListIPs", "GetIP", "UpdateIP", "ReleaseIP":
		return IPAMFullAccess
	case "GetPrivateNetwork":
		return PrivateNetworksReadOnly
	}
	return ""
}

// Key is the API key every call is sent with, and what the API said of
// it. Set swaps it between two calls: a call already sent keeps the key
// it was sent with, and its answer is not held against the new one. The
// zero Key signs nothing (the SDK environment's key goes out) and only
// records what the API says. Safe for concurrent use.
type Key struct {
	mu         sync.Mutex
	access     string
	secret     string
	generation int
	refused    map[string]Refusal // by permission set; "" for the key itself
	// reached are the sets (and "" for the key itself) some call passed
	// IAM with since the process started, with any key: a replica that
	// served once stays ready (Unready).
	reached map[string]bool
}

// NewKey checks the pair as the SDK would and returns it in use.
func NewKey(access, secret string) (*Key, error) {
	k := &Key{}
	_, err := k.Set(access, secret)
	return k, err
}

// Set puts a new pair in use for the calls sent from now on, and reports
// whether it differs from the pair in use. A malformed pair changes
// nothing; the error names what is wrong, never the value.
func (k *Key) Set(access, secret string) (changed bool, err error) {
	if !validation.IsAccessKey(access) {
		return false, ErrMalformedAccessKey
	}
	if !validation.IsSecretKey(secret) {
		return false, ErrMalformedSecretKey
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if access == k.access && secret == k.secret {
		return false, nil
	}
	k.access, k.secret = access, secret
	k.generation++
	k.refused = nil
	return true, nil
}

// The errors of a malformed pair.
var (
	ErrMalformedAccessKey = errors.New("the access key is malformed: a Scaleway access key is SCW followed by 17 capitals or digits")
	ErrMalformedSecretKey = errors.New("the secret key is malformed: a Scaleway secret key is a UUID")
)

// Differs reports whether secret is not the secret key in use, without
// handing that out.
func (k *Key) Differs(secret string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return secret != k.secret
}

// AccessKey is the access key of the pair in use: the key's public name.
func (k *Key) AccessKey() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.access
}

// sign puts the secret in use on req and returns its generation.
func (k *Key) sign(req *http.Request) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.secret != "" {
		req.Header.Set("X-Auth-Token", k.secret)
	}
	return k.generation
}

// answered records what the API answered a call of op sent with the key
// of generation gen, errType being the error body's type: a 401 refuses
// the key, a 403 of IAM's (not a quota's) the permission set op needs, and
// an answer that shows the key passed IAM clears what that call proves: an
// authenticated key, and the set, for a call that needs no less (a read
// does not prove IPAMFullAccess). Answers to an older key say nothing of
// the one in use.
func (k *Key) answered(op string, gen, status int, errType string) {
	set := PermissionSet(op)
	if set == "" || status == 0 || status == http.StatusTooManyRequests || status >= 500 {
		return // needs no key, or the API did not judge it
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if gen != k.generation {
		return
	}
	switch {
	case status == http.StatusUnauthorized:
		k.refuse("", Refusal{Status: status, Operation: op, AccessKey: k.access})
		return
	case status == http.StatusForbidden && (errType == "permissions_denied" || errType == "authorization_required"):
		k.refuse(set, Refusal{Status: status, Operation: op, AccessKey: k.access, PermissionSet: set})
		return
	}
	k.accept("")
	k.reached[set] = true
	if proves(op) {
		k.accept(set)
	}
}

// proves reports whether a call of op that passes IAM shows the key holds
// the whole set PermissionSet(op) names.
func proves(op string) bool { return op != "ListIPs" && op != "GetIP" }

func (k *Key) accept(set string) {
	delete(k.refused, set)
	if k.reached == nil {
		k.reached = map[string]bool{}
	}
	k.reached[set] = true
}

// stale reports whether gen is older than the key in use.
func (k *Key) stale(gen int) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return gen != k.generation
}

func (k *Key) refuse(set string, r Refusal) {
	if old, ok := k.refused[set]; ok {
		r.Since = old.Since
	} else {
		r.Since = time.Now()
	}
	if k.refused == nil {
		k.refused = map[string]Refusal{}
	}
	k.refused[set] = r
}

// Refusals are what the API refuses the key in use, the key itself first,
// then by permission set.
func (k *Key) Refusals() []Refusal {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := make([]Refusal, 0, len(k.refused))
	for _, r := range k.refused {
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b Refusal) int { return cmp.Compare(a.PermissionSet, b.PermissionSet) })
	return out
}

// Refused is the refusal of set ("" for the key itself, a 401) as an
// error, nil when the API has not refused it since the key was set or
// since a call needing it last succeeded.
func (k *Key) Refused(set string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if r, ok := k.refused[set]; ok {
		return r
	}
	return nil
}

// Unready is Refused(set) for a process that never passed IAM with a call
// of set, with any key: a new pod whose key may not read IPAM, say, does
// not become ready, so that a rollout stops before it replaces working
// pods; a pod that served keeps answering (the webhook's denials say what
// is wrong) and reports the refusal through Refused, the metric and the
// alert, rather than leave the webhook's Service without endpoints.
func (k *Key) Unready(set string) error {
	k.mu.Lock()
	reached := k.reached[set]
	k.mu.Unlock()
	if reached {
		return nil
	}
	return k.Refused(set)
}

// Err is the first refusal as an error, nil when the API accepted the key
// on every call made with it since the last refusal of each kind.
func (k *Key) Err() error {
	if r := k.Refusals(); len(r) > 0 {
		return r[0]
	}
	return nil
}

// Refusal is the API's refusal of the key: a 401 (the key is unknown,
// revoked or expired) or a 403 (the key's IAM application lacks
// PermissionSet in the Project the call touched).
type Refusal struct {
	Status        int
	Operation     string
	AccessKey     string
	PermissionSet string // empty for a 401
	Since         time.Time
}

// Reason is the refusal's Scaleway error type.
func (r Refusal) Reason() string {
	if r.Status == http.StatusUnauthorized {
		return "denied_authentication"
	}
	return "permissions_denied"
}

func (r Refusal) Error() string {
	key, since := "the API key", r.Since.UTC().Format(time.RFC3339)
	if r.AccessKey != "" {
		key = "API key " + r.AccessKey
	}
	if r.Status == http.StatusUnauthorized {
		return fmt.Sprintf("the Scaleway API refuses %s (401 denied_authentication on %s since %s): the key is unknown, revoked or expired; put a valid key in the credentials Secret (docs/security.md, \"Rotating the API key\")",
			key, r.Operation, since)
	}
	return fmt.Sprintf("%s lacks %s (403 permissions_denied on %s since %s): give the key's IAM application a policy with the permission set %s on the cluster's Project, where every pool's Private Network must be (docs/install.md, step 3)",
		key, r.PermissionSet, r.Operation, since, r.PermissionSet)
}
