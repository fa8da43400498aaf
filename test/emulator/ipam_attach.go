package emulator

import (
	"fmt"
	"net"
	"strings"

	ipam "github.com/scaleway/scaleway-sdk-go/api/ipam/v1"
)

type customResourceBody struct {
	MacAddress string  `json:"mac_address"`
	Name       *string `json:"name"`
}

// attachment validates a custom resource of a request.
func (r *customResourceBody) attachment(arg string) (*attachment, *apiError) {
	if r == nil {
		return nil, invalidArgumentErr(arg, "%s is required", arg)
	}
	if _, err := net.ParseMAC(r.MacAddress); err != nil {
		return nil, invalidArgumentErr(arg+".mac_address", "%q is not a MAC address", r.MacAddress)
	}
	a := &attachment{typ: string(ipam.ResourceTypeCustom), id: newID(), mac: r.MacAddress}
	if r.Name != nil {
		a.name = *r.Name
	}
	return a, nil
}

func (r *customResourceBody) matches(a *attachment) bool {
	return r != nil && a != nil && a.typ == string(ipam.ResourceTypeCustom) && strings.EqualFold(r.MacAddress, a.mac)
}

// --- handlers: attach, detach, move ---

func (api *ipamAPI) attachIP(c *call) reply {
	c.ipID = c.id
	var body struct {
		Resource *customResourceBody `json:"resource"`
	}
	if rep := decodeBody(c, &body); rep != nil {
		return *rep
	}
	a, aerr := body.Resource.attachment("resource")
	if aerr != nil {
		return aerr.reply()
	}
	api.mu.Lock()
	defer api.mu.Unlock()
	ip, err := api.attachLocked(c, c.id, a)
	if err != nil {
		return errorReply(err)
	}
	return ok(ip.json(api.opts.Region))
}

func (api *ipamAPI) detachIP(c *call) reply {
	c.ipID = c.id
	var body struct {
		Resource *customResourceBody `json:"resource"`
	}
	if rep := decodeBody(c, &body); rep != nil {
		return *rep
	}
	if body.Resource == nil {
		return errInvalidArguments("resource", "resource is required")
	}
	api.mu.Lock()
	defer api.mu.Unlock()
	ip := api.st.ips[c.id]
	if ip == nil {
		return notFoundErr("ip", c.id).reply()
	}
	if !body.Resource.matches(ip.res) {
		return preconditionErr(preconditionNotUsable, notAttachedHelp(ip, body.Resource)).reply()
	}
	api.detachLocked(c, ip)
	return ok(ip.json(api.opts.Region))
}

func notAttachedHelp(ip *ipRecord, r *customResourceBody) string {
	switch {
	case ip.res == nil:
		return "IP is not attached to any resource"
	case ip.res.typ != string(ipam.ResourceTypeCustom):
		return fmt.Sprintf("IP is attached to %s %s, which only its product's API can detach", ip.res.typ, ip.res.id)
	}
	return fmt.Sprintf("IP is not attached to the custom resource with MAC address %s", r.MacAddress)
}

// moveIP detaches from from_resource and attaches to to_resource; without
// to_resource it only detaches.
func (api *ipamAPI) moveIP(c *call) reply {
	c.ipID = c.id
	var body struct {
		FromResource *customResourceBody `json:"from_resource"`
		ToResource   *customResourceBody `json:"to_resource"`
	}
	if rep := decodeBody(c, &body); rep != nil {
		return *rep
	}
	if body.FromResource == nil {
		return errInvalidArguments("from_resource", "from_resource is required")
	}
	var to *attachment
	if body.ToResource != nil {
		a, aerr := body.ToResource.attachment("to_resource")
		if aerr != nil {
			return aerr.reply()
		}
		to = a
	}
	api.mu.Lock()
	defer api.mu.Unlock()
	ip := api.st.ips[c.id]
	if ip == nil {
		return notFoundErr("ip", c.id).reply()
	}
	if !body.FromResource.matches(ip.res) {
		return preconditionErr(preconditionNotUsable, notAttachedHelp(ip, body.FromResource)).reply()
	}
	api.detachLocked(c, ip)
	if to != nil {
		if _, err := api.attachLocked(c, ip.id, to); err != nil {
			return errorReply(err)
		}
	}
	return ok(ip.json(api.opts.Region))
}
