package emulator

import (
	"strings"
)

// UpdateLB and MigrateLB: the changes the CCM makes to a Load Balancer
// itself (its SSL level, from an annotation, and its type). Both leave it
// ready, its instance pending for a moment, as the recordings show.

func (api *lbAPI) updateLB(c *call) reply {
	var body struct {
		Name                  *string  `json:"name"`
		Description           *string  `json:"description"`
		Tags                  []string `json:"tags"`
		SslCompatibilityLevel *string  `json:"ssl_compatibility_level"`
	}
	if rep := decodeBody(c, &body); rep != nil {
		return *rep
	}
	if body.Name == nil || *body.Name == "" {
		return errInvalidArguments("name", "name is required")
	}
	api.mu.Lock()
	defer api.mu.Unlock()
	lb, aerr := api.changeableLBLocked(c)
	if aerr != nil {
		return aerr.reply()
	}
	now := api.now()
	lb.name = *body.Name
	if body.Description != nil {
		lb.description = *body.Description
	}
	if body.Tags != nil {
		lb.tags = nonNil(body.Tags)
	}
	if body.SslCompatibilityLevel != nil {
		lb.sslLevel = sslLevel(*body.SslCompatibilityLevel)
	}
	lb.updatedAt = now
	lb.touch(now, api.opts.LBSettleDelay)
	return ok(lb.json(api.view(true)))
}

// migrateLB changes the type. The real API moves the Load Balancer to an
// instance of the new type; here it takes what a creation takes.
func (api *lbAPI) migrateLB(c *call) reply {
	var body struct {
		Type string `json:"type"`
	}
	if rep := decodeBody(c, &body); rep != nil {
		return *rep
	}
	if body.Type == "" {
		return errInvalidArguments("type", "type is required")
	}
	api.mu.Lock()
	defer api.mu.Unlock()
	lb, aerr := api.changeableLBLocked(c)
	if aerr != nil {
		return aerr.reply()
	}
	now := api.now()
	lb.typ, lb.updatedAt = strings.ToLower(body.Type), now
	lb.touch(now, api.opts.LBCreateDelay)
	return ok(lb.json(api.view(true)))
}
