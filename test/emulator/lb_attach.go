package emulator

import (
	"fmt"
	"slices"

	ipam "github.com/scaleway/scaleway-sdk-go/api/ipam/v1"
)

// Attachments of Load Balancers to Private Networks.

type lbPNJSON struct {
	CreatedAt        string         `json:"created_at"`
	DHCPConfig       lbDHCPConfJSON `json:"dhcp_config"`
	IpamIDs          []string       `json:"ipam_ids"`
	LB               lbJSON         `json:"lb"`
	PrivateNetworkID string         `json:"private_network_id"`
	Status           string         `json:"status"`
	UpdatedAt        string         `json:"updated_at"`
}

type lbDHCPConfJSON struct {
	IPID string `json:"ip_id"`
}

func (lp *lbPNRec) json(lb *lbRec, v lbView) lbPNJSON {
	status, updated := lbPNStatusReady, maxTime(lp.updatedAt, lp.readyAt)
	switch {
	case !lp.goneAt.IsZero():
		status, updated = lbPNStatusPending, lp.updatedAt
	case v.now.Before(lp.readyAt):
		status, updated = lbPNStatusPending, lp.updatedAt
	}
	return lbPNJSON{
		CreatedAt:        ts(lp.createdAt),
		DHCPConfig:       lbDHCPConfJSON{IPID: lp.ip.id},
		IpamIDs:          []string{lp.ip.id},
		LB:               lb.json(v),
		PrivateNetworkID: lp.pn.id,
		Status:           status,
		UpdatedAt:        ts(updated),
	}
}

// attachLBPrivateNetwork gives the Load Balancer the reserved IP of
// ipam_ids on the Private Network, or a new one (DHCP) without ipam_ids.
// static_config, dhcp_config and ipam_config are accepted and ignored.
func (api *lbAPI) attachLBPrivateNetwork(c *call) reply {
	var body struct {
		PrivateNetworkID string   `json:"private_network_id"`
		IpamIDs          []string `json:"ipam_ids"`
		StaticConfig     any      `json:"static_config"`
		DHCPConfig       any      `json:"dhcp_config"`
		IpamConfig       any      `json:"ipam_config"`
	}
	if rep := decodeBody(c, &body); rep != nil {
		return *rep
	}
	if body.PrivateNetworkID == "" {
		return errInvalidArguments("private_network_id", "private_network_id is required")
	}
	if len(body.IpamIDs) > 1 {
		return errInvalidArguments("ipam_ids", "at most one IPAM ID (an IPv4 address) can be given per Private Network")
	}
	api.mu.Lock()
	defer api.mu.Unlock()
	lb, aerr := api.changeableLBLocked(c)
	if aerr != nil {
		return aerr.reply()
	}
	pn := api.st.pns[body.PrivateNetworkID]
	if pn == nil {
		return notFoundErr("private_network", body.PrivateNetworkID).reply()
	}
	if lb.attachment(pn.id) != nil {
		return alreadyExistsErr("private_network", pn.id,
			fmt.Sprintf("Private Network %s is already attached to Load Balancer %s", pn.id, lb.id)).reply()
	}
	c.lbID = lb.id
	att := &attachment{typ: string(ipam.ResourceTypeLBServer), id: lb.id, name: lb.name, mac: api.st.newMAC()}
	now := api.now()
	lp := &lbPNRec{pn: pn, att: att, createdAt: now, updatedAt: now, readyAt: now.Add(api.opts.LBSettleDelay)}
	if len(body.IpamIDs) == 1 {
		ip, aerr := api.reservedForLBLocked(body.IpamIDs[0], pn)
		if aerr != nil {
			return aerr.reply()
		}
		if _, err := api.attachLocked(c, ip.id, att); err != nil {
			return errorReply(err)
		}
		lp.ip = ip
	} else {
		ip, err := api.bookLocked(c, booking{pnID: pn.id, res: att}, now)
		if err != nil {
			return errorReply(err)
		}
		lp.ip, lp.dhcp = ip, true
	}
	c.ipID = lp.ip.id
	lb.pns = append(lb.pns, lp)
	lb.touch(now, api.opts.LBSettleDelay)
	return ok(lp.json(lb, api.view(true)))
}

// reservedForLBLocked checks the IP an attachment names: it exists, is an
// IPv4 address of pn, and is attached to nothing.
func (api *lbAPI) reservedForLBLocked(id string, pn *pnRec) (*ipRecord, *apiError) {
	ip := api.st.ips[id]
	switch {
	case ip == nil:
		return nil, notFoundErr("ip", id)
	case ip.subnet.pn != pn:
		return nil, invalidArgumentErr("ipam_ids.0", "IP %s is in Private Network %s, not in %s", id, ip.subnet.pn.id, pn.id)
	case ip.addr.Is6():
		return nil, invalidArgumentErr("ipam_ids.0", "IP %s is an IPv6 address; only an IPv4 one can be given", id)
	case ip.res != nil:
		return nil, alreadyExistsErr("ip", id, fmt.Sprintf("IP %s is already attached to %s %s", id, ip.res.typ, ip.res.id))
	}
	return ip, nil
}

func (api *lbAPI) detachLBPrivateNetwork(c *call) reply {
	var body struct {
		PrivateNetworkID string `json:"private_network_id"`
	}
	if rep := decodeBody(c, &body); rep != nil {
		return *rep
	}
	if body.PrivateNetworkID == "" {
		return errInvalidArguments("private_network_id", "private_network_id is required")
	}
	api.mu.Lock()
	defer api.mu.Unlock()
	lb, aerr := api.changeableLBLocked(c)
	if aerr != nil {
		return aerr.reply()
	}
	lp := lb.attachment(body.PrivateNetworkID)
	if lp == nil {
		return notFoundErr("private_network", body.PrivateNetworkID).reply()
	}
	c.lbID, c.ipID = lb.id, lp.ip.id
	api.detachLBPNLocked(c, lp)
	now := api.now()
	lb.touch(now, api.opts.LBSettleDelay)
	if d := api.opts.LBSettleDelay; d > 0 {
		// Still listed, pending, while the API detaches it.
		lp.goneAt, lp.updatedAt = now.Add(d), now
		lb.pns = slices.DeleteFunc(lb.pns, func(x *lbPNRec) bool { return !x.goneAt.IsZero() && !now.Before(x.goneAt) })
	} else {
		lb.pns = slices.DeleteFunc(lb.pns, func(x *lbPNRec) bool { return x == lp })
	}
	return noContent()
}

// detachLBPNLocked ends an attachment in IPAM: its IP is detached, and
// released when the attachment booked it. An IP the Go API detached (and
// maybe attached elsewhere) meanwhile is left as it is. The caller takes
// the attachment off the Load Balancer.
func (api *lbAPI) detachLBPNLocked(c *call, lp *lbPNRec) {
	if !lp.goneAt.IsZero() {
		return
	}
	if ip := lp.ip; api.st.ips[ip.id] == ip && ip.res == lp.att {
		api.detachLocked(c, ip)
		if lp.dhcp {
			api.releaseLocked(c, ip)
		}
	}
}

func (api *lbAPI) listLBPrivateNetworks(c *call) reply {
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
	api.mu.RLock()
	defer api.mu.RUnlock()
	lb, aerr := api.lbLocked(c)
	if aerr != nil {
		return aerr.reply()
	}
	// The list shows its Load Balancer without instances.
	v := api.view(false)
	pns := lb.listedPNs(v.now)
	if desc {
		slices.Reverse(pns)
	}
	lo, hi := window(page, size, len(pns))
	out := struct {
		PrivateNetwork []lbPNJSON `json:"private_network"`
		TotalCount     int        `json:"total_count"`
	}{PrivateNetwork: []lbPNJSON{}, TotalCount: len(pns)}
	for _, lp := range pns[lo:hi] {
		out.PrivateNetwork = append(out.PrivateNetwork, lp.json(lb, v))
	}
	return ok(out)
}

// newMAC is a locally administered MAC address, unique in the emulator,
// upper case as IPAM shows the Load Balancers'.
func (st *state) newMAC() string {
	n := st.nextSeq()
	return fmt.Sprintf("02:00:00:%02X:%02X:%02X", byte(n>>16), byte(n>>8), byte(n))
}
