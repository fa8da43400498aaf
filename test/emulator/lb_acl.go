package emulator

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"
)

// ACLs of a frontend: the CCM lists them on every sync and replaces them
// all (SetACLs) when a Service's loadBalancerSourceRanges changes. Their
// match and action are kept as given.

type aclRec struct {
	id, name, description string
	index                 int32
	match, action         json.RawMessage
	createdAt, updatedAt  time.Time
}

type aclSpec struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Index       int32           `json:"index"`
	Match       json.RawMessage `json:"match"`
	Action      json.RawMessage `json:"action"`
}

type aclJSON struct {
	Action      json.RawMessage `json:"action"`
	CreatedAt   string          `json:"created_at"`
	Description string          `json:"description"`
	Frontend    frontendJSON    `json:"frontend"`
	ID          string          `json:"id"`
	Index       int32           `json:"index"`
	Match       json.RawMessage `json:"match"`
	Name        string          `json:"name"`
	UpdatedAt   string          `json:"updated_at"`
}

type aclListJSON struct {
	ACLs       []aclJSON `json:"acls"`
	TotalCount int       `json:"total_count"`
}

func (a *aclRec) json(f *frontendRec, v lbView) aclJSON {
	return aclJSON{
		Action: a.action, CreatedAt: ts(a.createdAt), Description: a.description, Frontend: f.json(v),
		ID: a.id, Index: a.index, Match: a.match, Name: a.name, UpdatedAt: ts(a.updatedAt),
	}
}

func (api *frontendAPI) listACLs(c *call) reply {
	page, size, aerr := paging(c.query)
	if aerr != nil {
		return aerr.reply()
	}
	desc := false
	switch ob := first(c.query, "order_by"); ob {
	case "", "created_at_asc":
	case "created_at_desc":
		desc = true
	default:
		return errInvalidArguments("order_by", fmt.Sprintf("unknown order_by %q", ob))
	}
	name := optString(c.query, "name")
	api.mu.RLock()
	defer api.mu.RUnlock()
	f, aerr := api.frontendLocked(c)
	if aerr != nil {
		return aerr.reply()
	}
	var acls []*aclRec
	for _, a := range f.acls {
		if name == nil || containsFold(a.name, *name) {
			acls = append(acls, a)
		}
	}
	if desc {
		slices.Reverse(acls)
	}
	lo, hi := window(page, size, len(acls))
	out := aclListJSON{ACLs: []aclJSON{}, TotalCount: len(acls)}
	v := api.view(false)
	for _, a := range acls[lo:hi] {
		out.ACLs = append(out.ACLs, a.json(f, v))
	}
	return ok(out)
}

// setACLs replaces every ACL of the frontend.
func (api *frontendAPI) setACLs(c *call) reply {
	var body struct {
		ACLs []aclSpec `json:"acls"`
	}
	if rep := decodeBody(c, &body); rep != nil {
		return *rep
	}
	for i, s := range body.ACLs {
		if len(s.Action) == 0 || string(s.Action) == "null" {
			return errInvalidArguments(fmt.Sprintf("acls.%d.action", i), "action is required")
		}
	}
	api.mu.Lock()
	defer api.mu.Unlock()
	f, aerr := api.changeableFrontendLocked(c)
	if aerr != nil {
		return aerr.reply()
	}
	now := api.now()
	f.acls = nil
	for _, s := range body.ACLs {
		match := s.Match
		if len(match) == 0 {
			match = json.RawMessage(`null`)
		}
		f.acls = append(f.acls, &aclRec{
			id: newID(), name: s.Name, description: s.Description, index: s.Index,
			match: match, action: s.Action, createdAt: now, updatedAt: now,
		})
	}
	f.lb.touch(now, api.opts.LBSettleDelay)
	out := aclListJSON{ACLs: []aclJSON{}, TotalCount: len(f.acls)}
	v := api.view(false)
	for _, a := range f.acls {
		out.ACLs = append(out.ACLs, a.json(f, v))
	}
	return ok(out)
}
