package emulator

import (
	"fmt"
	"net"
	"net/netip"

	ipam "github.com/scaleway/scaleway-sdk-go/api/ipam/v1"
	"github.com/scaleway/scaleway-sdk-go/scw"
)

// --- Go API: seeding, CCM-like attach, inspection ---

// Resource is what an IP is attached to: a custom resource of the IPAM API,
// or any product resource (lb_server, instance_server, rdb_instance…) as the
// product's own API would attach it.
type Resource struct {
	Type       string // e.g. "lb_server"; "custom" when empty
	ID         string // generated when empty
	Name       string
	MACAddress string
}

// AddIP books addr (the lowest free IPv4 address when addr is the zero
// Addr) in Private Network pnID for a holder other than the code under
// test: a VM, a database, another cluster. With res, the IP is attached to
// it. No HTTP: not counted, never faulted; the audit log records it.
func (api *ipamAPI) AddIP(pnID string, addr netip.Addr, tags []string, res *Resource) (string, error) {
	return api.AddIPWithID("", pnID, addr, tags, res)
}

// AddIPWithID is AddIP with the IP's ID chosen ("" for a new one), for
// fixtures that name it (the playground's bring-your-own example).
func (api *ipamAPI) AddIPWithID(id, pnID string, addr netip.Addr, tags []string, res *Resource) (string, error) {
	b := booking{id: id, pnID: pnID, addr: addr, tags: tags, v6: addr.IsValid() && addr.Unmap().Is6()}
	if res != nil {
		b.res = res.attachment()
	}
	api.mu.Lock()
	defer api.mu.Unlock()
	if api.st.ips[id] != nil {
		return "", fmt.Errorf("adding IP %s: %w", id, alreadyExistsErr("ip", id, "an IP with this ID exists"))
	}
	ip, err := api.bookLocked(nil, b, api.now())
	if err != nil {
		return "", fmt.Errorf("adding IP %s to Private Network %s: %w", addr, pnID, err)
	}
	return ip.id, nil
}

func (r Resource) attachment() *attachment {
	a := &attachment{typ: r.Type, id: r.ID, name: r.Name, mac: r.MACAddress}
	if a.typ == "" {
		a.typ = string(ipam.ResourceTypeCustom)
	}
	if a.id == "" {
		a.id = newID()
	}
	return a
}

// Attach attaches IP ipID to r, as a product's API (e.g. the cloud
// controller attaching a load balancer to a Private Network) would.
func (api *ipamAPI) Attach(ipID string, r Resource) error {
	api.mu.Lock()
	defer api.mu.Unlock()
	if _, err := api.attachLocked(nil, ipID, r.attachment()); err != nil {
		return fmt.Errorf("attaching IP %s: %w", ipID, err)
	}
	return nil
}

// Detach detaches IP ipID from whatever it is attached to.
func (api *ipamAPI) Detach(ipID string) error {
	api.mu.Lock()
	defer api.mu.Unlock()
	ip := api.st.ips[ipID]
	if ip == nil {
		return fmt.Errorf("detaching IP %s: %w", ipID, notFoundErr("ip", ipID))
	}
	if ip.res == nil {
		return fmt.Errorf("detaching IP %s: %w", ipID, preconditionErr(preconditionNotUsable, "IP is not attached to any resource"))
	}
	api.detachLocked(nil, ip)
	return nil
}

// IP is a snapshot of IP id as the SDK would decode it.
func (api *ipamAPI) IP(id string) (ipam.IP, bool) {
	api.mu.RLock()
	defer api.mu.RUnlock()
	ip := api.st.ips[id]
	if ip == nil {
		return ipam.IP{}, false
	}
	return api.sdkIP(ip), true
}

// IPs is a snapshot of every IP, oldest first.
func (api *ipamAPI) IPs() []ipam.IP {
	api.mu.RLock()
	defer api.mu.RUnlock()
	out := make([]ipam.IP, len(api.st.byCreated))
	for i, ip := range api.st.byCreated {
		out[i] = api.sdkIP(ip)
	}
	return out
}

func (api *ipamAPI) sdkIP(ip *ipRecord) ipam.IP {
	bits := ip.subnet.prefix.Bits()
	created, updated := ip.createdAt, ip.updatedAt
	subnetID := ip.subnet.id
	out := ipam.IP{
		ID: ip.id,
		Address: scw.IPNet{IPNet: net.IPNet{
			IP:   stdIP(ip.addr),
			Mask: net.CIDRMask(bits, ip.addr.BitLen()),
		}},
		ProjectID: ip.projectID,
		IsIPv6:    ip.addr.Is6(),
		CreatedAt: &created,
		UpdatedAt: &updated,
		Source:    &ipam.Source{SubnetID: &subnetID},
		Tags:      nonNil(ip.tags),
		Reverses:  make([]*ipam.Reverse, len(ip.reverses)),
		Region:    scw.Region(api.opts.Region),
	}
	for i, r := range ip.reverses {
		a := stdIP(r.address)
		out.Reverses[i] = &ipam.Reverse{Hostname: r.hostname, Address: &a}
	}
	if ip.res != nil {
		out.Resource = &ipam.Resource{
			Type: ipam.ResourceType(ip.res.typ), ID: ip.res.id,
			MacAddress: strPtrOrNil(ip.res.mac), Name: strPtrOrNil(ip.res.name),
		}
	}
	return out
}

// stdIP is a as the SDK decodes addresses: net.ParseIP's 16-byte form.
func stdIP(a netip.Addr) net.IP {
	return net.IP(a.AsSlice()).To16()
}
