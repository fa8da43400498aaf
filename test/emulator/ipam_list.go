package emulator

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	ipam "github.com/scaleway/scaleway-sdk-go/api/ipam/v1"
)

type ipFilter struct {
	projectID, orgID, pnID, subnetID, vpcID, sourceVPCID *string
	zonal                                                *string
	regional                                             *bool
	ipIDs                                                map[string]bool
	tags                                                 []string
	attached, v6                                         *bool
	resID, resName, mac                                  *string
	resIDs, resTypes                                     map[string]bool
	resType                                              string
}

func parseIPFilter(q map[string][]string) (*ipFilter, *apiError) {
	f := &ipFilter{
		projectID: optString(q, "project_id"), orgID: optString(q, "organization_id"),
		pnID: optString(q, "private_network_id"), subnetID: optString(q, "subnet_id"),
		vpcID: optString(q, "vpc_id"), sourceVPCID: optString(q, "source_vpc_id"),
		zonal: optString(q, "zonal"),
		ipIDs: set(q, "ip_ids"), tags: q["tags"],
		resID: optString(q, "resource_id"), resName: optString(q, "resource_name"), mac: optString(q, "mac_address"),
		resIDs: set(q, "resource_ids"), resTypes: set(q, "resource_types"),
		resType: first(q, "resource_type"),
	}
	var err *apiError
	if f.regional, err = optBool(q, "regional"); err != nil {
		return nil, err
	}
	if f.attached, err = optBool(q, "attached"); err != nil {
		return nil, err
	}
	if f.v6, err = optBool(q, "is_ipv6"); err != nil {
		return nil, err
	}
	// The SDK always sends resource_type=unknown_type: no filter.
	if f.resType == string(ipam.ResourceTypeUnknownType) {
		f.resType = ""
	}
	delete(f.resTypes, string(ipam.ResourceTypeUnknownType))
	if len(f.resTypes) == 0 {
		f.resTypes = nil
	}
	return f, nil
}

func (f *ipFilter) match(ip *ipRecord) bool {
	eq := func(want *string, have string) bool { return want == nil || *want == have }
	pn := ip.subnet.pn
	switch {
	case !eq(f.projectID, ip.projectID), !eq(f.orgID, ip.orgID),
		!eq(f.pnID, pn.id), !eq(f.subnetID, ip.subnet.id),
		!eq(f.vpcID, pn.vpc.id), !eq(f.sourceVPCID, pn.vpc.id):
		return false
	case f.zonal != nil, f.regional != nil && *f.regional:
		// Every emulated IP comes from a Private Network: none is zonal
		// or regional (public).
		return false
	case f.ipIDs != nil && !f.ipIDs[ip.id]:
		return false
	case len(f.tags) > 0 && !anyTag(ip.tags, f.tags):
		return false
	case f.attached != nil && *f.attached != (ip.res != nil):
		return false
	case f.v6 != nil && *f.v6 != ip.addr.Is6():
		return false
	}
	needRes := f.resID != nil || f.resName != nil || f.mac != nil || f.resIDs != nil || f.resTypes != nil || f.resType != ""
	if !needRes {
		return true
	}
	r := ip.res
	if r == nil {
		return false
	}
	switch {
	case !eq(f.resID, r.id):
		return false
	case f.resIDs != nil && !f.resIDs[r.id]:
		return false
	case f.resType != "" && f.resType != r.typ:
		return false
	case f.resTypes != nil && !f.resTypes[r.typ]:
		return false
	case f.resName != nil && !strings.Contains(r.name, *f.resName):
		return false
	case f.mac != nil && !strings.EqualFold(*f.mac, r.mac):
		return false
	}
	return true
}

// ipOrder is the ListIPs sort key (ascending) named by key, nil when
// unknown; ties fall back to the booking order so that every order is total
// and deterministic.
func ipOrder(key string) func(a, b *ipRecord) int {
	switch key {
	case "created_at":
		return cmpCreated
	case "updated_at":
		return func(a, b *ipRecord) int { return a.updatedAt.Compare(b.updatedAt) }
	case "attached_at":
		return func(a, b *ipRecord) int { return attachedAt(a).Compare(attachedAt(b)) }
	case "ip_address":
		return func(a, b *ipRecord) int { return a.addr.Compare(b.addr) }
	case "mac_address":
		return func(a, b *ipRecord) int { return strings.Compare(strings.ToLower(mac(a)), strings.ToLower(mac(b))) }
	}
	return nil
}

func attachedAt(ip *ipRecord) time.Time {
	if ip.res == nil {
		return time.Time{}
	}
	return ip.res.at
}

func mac(ip *ipRecord) string {
	if ip.res == nil {
		return ""
	}
	return ip.res.mac
}

func (api *ipamAPI) listIPs(c *call) reply {
	f, aerr := parseIPFilter(c.query)
	if aerr != nil {
		return aerr.reply()
	}
	page, size, aerr := paging(c.query)
	if aerr != nil {
		return aerr.reply()
	}
	orderBy := first(c.query, "order_by")
	if orderBy == "" {
		orderBy = string(ipam.ListIPsRequestOrderByCreatedAtDesc)
	}
	key, desc := orderBy, false
	switch {
	case strings.HasSuffix(orderBy, "_desc"):
		key, desc = strings.TrimSuffix(orderBy, "_desc"), true
	case strings.HasSuffix(orderBy, "_asc"):
		key = strings.TrimSuffix(orderBy, "_asc")
	}
	cmpKey := ipOrder(key)
	if cmpKey == nil || key == orderBy {
		return errInvalidArguments("order_by", fmt.Sprintf("unknown order_by %q", orderBy))
	}

	api.mu.RLock()
	defer api.mu.RUnlock()
	matches := api.st.ipLists.get(api.mu.generation(), ipListKey(c.query), func() []*ipRecord {
		return api.st.matchIPs(f, cmpKey, key == "created_at", desc)
	})
	out := listIPsJSON{IPs: []ipJSON{}, TotalCount: len(matches)}
	from, to := window(page, size, len(matches))
	for _, ip := range matches[from:to] {
		out.IPs = append(out.IPs, ip.json(api.opts.Region))
	}
	return ok(out)
}

// matchIPs are the IPs f matches, in the listing's order.
func (st *state) matchIPs(f *ipFilter, cmpKey func(a, b *ipRecord) int, byCreated, desc bool) []*ipRecord {
	var matches []*ipRecord
	for _, ip := range st.byCreated {
		if f.match(ip) {
			matches = append(matches, ip)
		}
	}
	if byCreated {
		// byCreated is already in this order: no sort.
		if desc {
			slices.Reverse(matches)
		}
		return matches
	}
	slices.SortFunc(matches, func(a, b *ipRecord) int {
		if desc {
			a, b = b, a
		}
		if c := cmpKey(a, b); c != 0 {
			return c
		}
		return cmpCreated(a, b)
	})
	return matches
}

// ipListCache keeps the matches of the last few ListIPs filters while the
// state does not change: the pages of one listing then cost a page each,
// not a pass over every IP (1,000 pages over 100,000 IPs took seconds, and
// the sweeper's benchmark measured the emulator). Any write lock on the
// state starts a new generation and empties it.
type ipListCache struct {
	mu      sync.Mutex
	gen     uint64
	byQuery map[string][]*ipRecord
}

// maxCachedLists bounds the filters kept: a few listers page at once (the
// replicas, the sweeper, the CCM).
const maxCachedLists = 16

// get returns the cached matches of key in generation gen, or computes
// them with match (under the state's read lock) and keeps them. The slice
// is shared: callers only read it.
func (c *ipListCache) get(gen uint64, key string, match func() []*ipRecord) []*ipRecord {
	c.mu.Lock()
	if c.gen == gen {
		if m, ok := c.byQuery[key]; ok {
			c.mu.Unlock()
			return m
		}
	}
	c.mu.Unlock()
	m := match()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byQuery == nil || c.gen != gen || len(c.byQuery) >= maxCachedLists {
		c.gen, c.byQuery = gen, map[string][]*ipRecord{}
	}
	c.byQuery[key] = m
	return m
}

// ipListKey is a listing's query less its paging: the pages of one listing
// share it.
func ipListKey(q map[string][]string) string {
	keys := make([]string, 0, len(q))
	for k := range q {
		if k != "page" && k != "page_size" {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(url.QueryEscape(k))
		// The values keep their order: a single-valued filter reads the
		// first.
		for _, v := range q[k] {
			b.WriteByte('=')
			b.WriteString(url.QueryEscape(v))
		}
		b.WriteByte('&')
	}
	return b.String()
}
