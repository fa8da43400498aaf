package emulator

import (
	"cmp"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"go4.org/netipx"
)

// stateMutex is the RWMutex over state that counts its write locks: a
// value read under the read lock stays valid while the generation is the
// same (the ListIPs match cache relies on it).
type stateMutex struct {
	sync.RWMutex
	gen atomic.Uint64
}

// Lock takes the write lock and starts a new generation: whatever the
// holder changes, derived values of the previous one are stale.
func (m *stateMutex) Lock() {
	m.RWMutex.Lock()
	m.gen.Add(1)
}

// generation is the count of write locks so far; read it under a lock.
func (m *stateMutex) generation() uint64 { return m.gen.Load() }

// state is every emulated object; cloud.mu guards it.
type state struct {
	seq        uint64
	projects   map[string]*project
	vpcs       map[string]*vpcRec
	defaultVPC map[string]*vpcRec // by project
	pns        map[string]*pnRec
	subnets    map[string]*subnetRec
	ips        map[string]*ipRecord
	// byCreated holds every IP sorted by (createdAt, seq): ListIPs in its
	// default order walks it without sorting, and pages cost one pass.
	byCreated []*ipRecord
	lbState
	audit []AuditEvent
	// ipLists caches the IPs a ListIPs filter matched, for its next pages.
	ipLists *ipListCache
}

func newState() state {
	return state{
		projects:   map[string]*project{},
		vpcs:       map[string]*vpcRec{},
		defaultVPC: map[string]*vpcRec{},
		pns:        map[string]*pnRec{},
		subnets:    map[string]*subnetRec{},
		ips:        map[string]*ipRecord{},
		lbState:    newLBState(),
		ipLists:    &ipListCache{},
	}
}

func (st *state) nextSeq() uint64 {
	st.seq++
	return st.seq
}

type project struct {
	id, name, orgID, description string
	createdAt, updatedAt         time.Time
}

type vpcRec struct {
	id, name, projectID, orgID string
	tags                       []string
	isDefault                  bool
	customRoutes               bool
	transitivity               bool
	createdAt, updatedAt       time.Time
	seq                        uint64
	pns                        map[string]*pnRec
}

type pnRec struct {
	id, name, projectID, orgID string
	vpc                        *vpcRec
	tags                       []string
	subnets                    []*subnetRec
	defaultRoutePropagation    bool
	createdAt, updatedAt       time.Time
	seq                        uint64
	ipCount                    int
}

type subnetRec struct {
	id                   string
	prefix               netip.Prefix
	pn                   *pnRec
	createdAt, updatedAt time.Time
	seq                  uint64
	// first and last bound the bookable addresses: IPAM keeps the first two
	// and the last two of every subnet. first > last when there is none.
	first, last netip.Addr
	used        map[netip.Addr]*ipRecord
	// cursor: no address below it is free, so the lowest free one is found
	// without rescanning the booked ones (amortized O(1) per booking).
	cursor netip.Addr
}

func newSubnet(id string, p netip.Prefix, pn *pnRec, now time.Time, seq uint64) *subnetRec {
	first := p.Addr().Next().Next()
	last := netipx.PrefixLastIP(p).Prev().Prev()
	return &subnetRec{
		id: id, prefix: p, pn: pn, createdAt: now, updatedAt: now, seq: seq,
		first: first, last: last, cursor: first, used: map[netip.Addr]*ipRecord{},
	}
}

func (sn *subnetRec) v6() bool { return sn.prefix.Addr().Is6() }

// bookable tells whether a is in the subnet and not one of IPAM's own.
func (sn *subnetRec) bookable(a netip.Addr) bool {
	return sn.prefix.Contains(a) && a.Compare(sn.first) >= 0 && a.Compare(sn.last) <= 0
}

// lowestFree is the lowest bookable address not booked.
func (sn *subnetRec) lowestFree() (netip.Addr, bool) {
	for a := sn.cursor; a.IsValid() && a.Compare(sn.last) <= 0; a = a.Next() {
		if _, taken := sn.used[a]; !taken {
			sn.cursor = a
			return a, true
		}
	}
	if sn.last.Compare(sn.first) >= 0 {
		sn.cursor = sn.last.Next()
	}
	return netip.Addr{}, false
}

func (sn *subnetRec) take(a netip.Addr, ip *ipRecord) {
	sn.used[a] = ip
	if a == sn.cursor {
		sn.cursor = a.Next()
	}
}

func (sn *subnetRec) free(a netip.Addr) {
	delete(sn.used, a)
	if a.Compare(sn.cursor) < 0 {
		sn.cursor = a
	}
}

type ipRecord struct {
	id                   string
	seq                  uint64
	addr                 netip.Addr
	subnet               *subnetRec
	projectID, orgID     string
	tags                 []string
	reverses             []reverse
	res                  *attachment
	createdAt, updatedAt time.Time
}

type reverse struct {
	hostname string
	address  netip.Addr
}

type attachment struct {
	typ, id, name, mac string
	at                 time.Time
}

// cmpCreated orders IPs as byCreated holds them.
func cmpCreated(a, b *ipRecord) int {
	if c := a.createdAt.Compare(b.createdAt); c != 0 {
		return c
	}
	return cmp.Compare(a.seq, b.seq)
}

func (st *state) indexIP(ip *ipRecord) {
	i, _ := slices.BinarySearchFunc(st.byCreated, ip, cmpCreated)
	st.byCreated = slices.Insert(st.byCreated, i, ip)
	st.ips[ip.id] = ip
	ip.subnet.take(ip.addr, ip)
	ip.subnet.pn.ipCount++
}

func (st *state) unindexIP(ip *ipRecord) {
	if i, found := slices.BinarySearchFunc(st.byCreated, ip, cmpCreated); found {
		st.byCreated = slices.Delete(st.byCreated, i, i+1)
	}
	delete(st.ips, ip.id)
	ip.subnet.free(ip.addr)
	ip.subnet.pn.ipCount--
}

// --- wire shapes, keys in the API's (alphabetical) order ---

// timeLayout is the API's: RFC 3339, UTC, always six fractional digits.
const timeLayout = "2006-01-02T15:04:05.000000Z"

func ts(t time.Time) string { return t.UTC().Format(timeLayout) }

func newID() string { return uuid.NewString() }

type ipJSON struct {
	Address   string        `json:"address"`
	CreatedAt string        `json:"created_at"`
	ID        string        `json:"id"`
	IsIPv6    bool          `json:"is_ipv6"`
	ProjectID string        `json:"project_id"`
	Region    string        `json:"region"`
	Resource  *resourceJSON `json:"resource"`
	Reverses  []reverseJSON `json:"reverses"`
	Source    sourceJSON    `json:"source"`
	Tags      []string      `json:"tags"`
	UpdatedAt string        `json:"updated_at"`
	Zone      *string       `json:"zone"`
}

type resourceJSON struct {
	ID         string  `json:"id"`
	MacAddress *string `json:"mac_address"`
	Name       *string `json:"name"`
	Type       string  `json:"type"`
}

type reverseJSON struct {
	Address  string `json:"address"`
	Hostname string `json:"hostname"`
}

type sourceJSON struct {
	SubnetID string `json:"subnet_id"`
}

type listIPsJSON struct {
	IPs        []ipJSON `json:"ips"`
	TotalCount int      `json:"total_count"`
}

type vpcJSON struct {
	CreatedAt                      string   `json:"created_at"`
	CustomRoutesPropagationEnabled bool     `json:"custom_routes_propagation_enabled"`
	ID                             string   `json:"id"`
	IsDefault                      bool     `json:"is_default"`
	Name                           string   `json:"name"`
	OrganizationID                 string   `json:"organization_id"`
	PrivateNetworkCount            int      `json:"private_network_count"`
	ProjectID                      string   `json:"project_id"`
	Region                         string   `json:"region"`
	RoutingEnabled                 bool     `json:"routing_enabled"`
	S3IntegrationEnabled           bool     `json:"s3_integration_enabled"`
	Tags                           []string `json:"tags"`
	TransitivityEnabled            bool     `json:"transitivity_enabled"`
	UpdatedAt                      string   `json:"updated_at"`
}

type pnJSON struct {
	CreatedAt                      string       `json:"created_at"`
	DefaultRoutePropagationEnabled bool         `json:"default_route_propagation_enabled"`
	DHCPEnabled                    bool         `json:"dhcp_enabled"`
	HasS3Integration               bool         `json:"has_s3_integration"`
	ID                             string       `json:"id"`
	Name                           string       `json:"name"`
	OrganizationID                 string       `json:"organization_id"`
	ProjectID                      string       `json:"project_id"`
	Region                         string       `json:"region"`
	Subnets                        []subnetJSON `json:"subnets"`
	Tags                           []string     `json:"tags"`
	UpdatedAt                      string       `json:"updated_at"`
	VpcID                          string       `json:"vpc_id"`
}

type subnetJSON struct {
	CreatedAt        string `json:"created_at"`
	ID               string `json:"id"`
	PrivateNetworkID string `json:"private_network_id"`
	ProjectID        string `json:"project_id"`
	Region           string `json:"region"`
	Subnet           string `json:"subnet"`
	UpdatedAt        string `json:"updated_at"`
	VpcID            string `json:"vpc_id"`
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return slices.Clone(s)
}

func strPtrOrNil(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// --- list helpers ---

const (
	defaultPageSize = 50
	maxPageSize     = 1000
)

// paging reads page (1-based, default 1) and page_size (default 50, at most
// 1000).
func paging(q map[string][]string) (page, size int, err *apiError) {
	page, size = 1, defaultPageSize
	if v := first(q, "page"); v != "" {
		n, perr := strconv.Atoi(v)
		if perr != nil || n < 1 {
			return 0, 0, invalidArgumentErr("page", "page must be a positive integer, got %q", v)
		}
		page = n
	}
	if v := first(q, "page_size"); v != "" {
		n, perr := strconv.Atoi(v)
		if perr != nil || n < 0 {
			return 0, 0, invalidArgumentErr("page_size", "page_size must be a positive integer, got %q", v)
		}
		if n > maxPageSize {
			return 0, 0, invalidArgumentErr("page_size", "page_size must be lower or equal to %d", maxPageSize)
		}
		if n > 0 {
			size = n
		}
	}
	return page, size, nil
}

// window is the slice bounds of a page over n items.
func window(page, size, n int) (int, int) {
	lo := min((page-1)*size, n)
	return lo, min(lo+size, n)
}

func first(q map[string][]string, key string) string {
	if v := q[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}

func optString(q map[string][]string, key string) *string {
	if v, ok := q[key]; ok && len(v) > 0 {
		return &v[0]
	}
	return nil
}

func optBool(q map[string][]string, key string) (*bool, *apiError) {
	v, ok := q[key]
	if !ok || len(v) == 0 {
		return nil, nil
	}
	b, err := strconv.ParseBool(v[0])
	if err != nil {
		return nil, invalidArgumentErr(key, "%s must be true or false, got %q", key, v[0])
	}
	return &b, nil
}

// set collects a repeated query key; nil when absent.
func set(q map[string][]string, key string) map[string]bool {
	v := q[key]
	if len(v) == 0 {
		return nil
	}
	m := make(map[string]bool, len(v))
	for _, x := range v {
		m[x] = true
	}
	return m
}

// anyTag tells whether have holds one of want (the API's OR semantics).
func anyTag(have []string, want []string) bool {
	for _, w := range want {
		if slices.Contains(have, w) {
			return true
		}
	}
	return false
}

func containsFold(s, sub string) bool {
	return strings.Contains(strings.ToLower(s), strings.ToLower(sub))
}
