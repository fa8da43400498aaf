package emulator

import (
	"encoding/json"
	"net/http"
	"slices"
	"sync"
)

// Key is an API key as Scaleway IAM sees it: the secret a call carries in
// X-Auth-Token, the Projects its IAM application's policy covers and the
// permission sets it grants there.
type Key struct {
	AccessKey, SecretKey string
	// ProjectIDs the policy covers; none covers every Project of the
	// organisation.
	ProjectIDs []string
	// PermissionSets granted; none grants every set (the organisation's
	// owner).
	PermissionSets []string
}

// Every permission set that allows op, by what it reads or writes. The
// names are Scaleway IAM's.
func permissionSets(op Op) []string {
	read := isRead(op)
	switch resourceOf(op) {
	case "ip":
		if read {
			return []string{"IPAMReadOnly", "IPAMFullAccess"}
		}
		return []string{"IPAMFullAccess"}
	case "private_network", "subnet":
		if read {
			return []string{"PrivateNetworksReadOnly", "PrivateNetworksFullAccess", "VPCReadOnly", "VPCFullAccess"}
		}
		return []string{"PrivateNetworksFullAccess", "VPCFullAccess"}
	case "vpc":
		if read {
			return []string{"VPCReadOnly", "VPCFullAccess"}
		}
		return []string{"VPCFullAccess"}
	case "project":
		return []string{"ProjectManager"}
	case "metadata":
		return nil
	}
	if read {
		return []string{"LoadBalancersReadOnly", "LoadBalancersFullAccess"}
	}
	return []string{"LoadBalancersFullAccess"}
}

// keyring holds the keys the emulator knows. Open (no key in its Options),
// any non-empty token but a revoked one is a key of the organisation's
// owner. Its own lock: a key's change is no change of the cloud's state.
type keyring struct {
	mu      sync.RWMutex
	open    bool
	keys    map[string]Key // by secret
	revoked map[string]bool
}

func newKeyring(opts Options) *keyring {
	kr := &keyring{keys: map[string]Key{}, revoked: map[string]bool{}, open: opts.SecretKey == "" && len(opts.Keys) == 0}
	if opts.SecretKey != "" {
		kr.keys[opts.SecretKey] = Key{AccessKey: TestAccessKey, SecretKey: opts.SecretKey}
	}
	for _, k := range opts.Keys {
		kr.keys[k.SecretKey] = k
	}
	return kr
}

// AddKey makes k known, as creating an API key in IAM does; a key with the
// same secret is replaced.
func (s *Server) AddKey(k Key) {
	s.iam.mu.Lock()
	defer s.iam.mu.Unlock()
	s.iam.keys[k.SecretKey] = k
	delete(s.iam.revoked, k.SecretKey)
}

// RevokeKey forgets the key whose secret is secret, as deleting it in IAM
// does: its next call is answered 401.
func (s *Server) RevokeKey(secret string) {
	s.iam.mu.Lock()
	defer s.iam.mu.Unlock()
	delete(s.iam.keys, secret)
	s.iam.revoked[secret] = true
}

// authenticate finds the call's key; false answers 401.
func (s *Server) authenticate(r *http.Request) (Key, bool) {
	tok := r.Header.Get("X-Auth-Token")
	if tok == "" {
		return Key{}, false
	}
	s.iam.mu.RLock()
	defer s.iam.mu.RUnlock()
	if k, ok := s.iam.keys[tok]; ok {
		return k, true
	}
	return Key{SecretKey: tok}, s.iam.open && !s.iam.revoked[tok]
}

// authorize answers 403 permissions_denied, in the recorded shape, when k
// may not run c: its sets do not allow the operation, or the Project the
// call names or touches is not one its policy covers.
func (s *Server) authorize(k Key, c *call) *reply {
	sets := permissionSets(c.op)
	if sets == nil {
		return nil
	}
	allowed := k.PermissionSets == nil || slices.ContainsFunc(sets, func(set string) bool { return slices.Contains(k.PermissionSets, set) })
	if allowed && len(k.ProjectIDs) > 0 {
		allowed = s.inProjects(c, k.ProjectIDs)
	}
	if allowed {
		return nil
	}
	rep := reply{status: http.StatusForbidden, body: faultBody(c.op, http.StatusForbidden)}
	return &rep
}

// inProjects reports whether the Project a call names (project_id in its
// query or body) or touches (the IP or Private Network of its path) is one
// of projects. A call that names none lists or creates across the
// organisation: only a key covering every Project may make it (IAM denies
// it to the others since its policy conditions, scaleway/scaleway-cli#5686).
func (s *Server) inProjects(c *call, projects []string) bool {
	if p := c.query["project_id"]; len(p) == 1 {
		return slices.Contains(projects, p[0])
	}
	var body struct {
		ProjectID string `json:"project_id"`
	}
	if len(c.body) > 0 && json.Unmarshal(c.body, &body) == nil && body.ProjectID != "" {
		return slices.Contains(projects, body.ProjectID)
	}
	if c.id == "" {
		return false
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	switch resourceOf(c.op) {
	case "ip":
		if ip := s.st.ips[c.id]; ip != nil {
			return slices.Contains(projects, ip.projectID)
		}
	case "private_network":
		if pn := s.st.pns[c.id]; pn != nil {
			return slices.Contains(projects, pn.projectID)
		}
	}
	// An ID it does not know: the handler answers 404.
	return true
}
