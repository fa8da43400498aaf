package emulator

import (
	"time"
)

// What a Load Balancer is made of, and how it shows on the wire.
//
// The recordings (shared/scaleway-recordings/lb) show a Load Balancer's
// life: CreateLB answers status to_create with no instance yet; some 0.2 s
// later it is creating, its instance unknown; about 3 s after the creation
// it is ready. Every change of its configuration (a frontend, a backend,
// servers, an update) leaves the Load Balancer ready and its instance
// pending for a moment. An attached Private Network is pending about 2 s,
// then ready; a detached one stays listed, pending, about as long. The
// emulator plays these from its clock (Options.LBCreateDelay and
// Options.LBSettleDelay); with both zero everything is ready at once.

// Statuses of a Load Balancer, of its instance and of its attachments.
const (
	lbStatusToCreate  = "to_create"
	lbStatusCreating  = "creating"
	lbStatusReady     = "ready"
	lbStatusToDelete  = "to_delete"
	lbInstanceUnknown = "unknown"
	lbInstancePending = "pending"
	lbPNStatusPending = "pending"
	lbPNStatusReady   = "ready"
)

// lbToCreateFor is how long a new Load Balancer answers to_create before
// creating: about 0.2 s in the recordings.
const lbToCreateFor = 250 * time.Millisecond

// lbState is the Load Balancer API's part of the state.
type lbState struct {
	lbs       map[string]*lbRec
	flexIPs   map[string]*flexIPRec
	frontends map[string]*frontendRec
	backends  map[string]*backendRec
}

func newLBState() lbState {
	return lbState{
		lbs: map[string]*lbRec{}, flexIPs: map[string]*flexIPRec{},
		frontends: map[string]*frontendRec{}, backends: map[string]*backendRec{},
	}
}

type lbRec struct {
	id, name, description string
	projectID, orgID      string
	zone, typ, sslLevel   string
	status                string // "", or to_delete once DeleteLB accepted
	tags                  []string
	createdAt, updatedAt  time.Time
	seq                   uint64
	pns                   []*lbPNRec // in attach order, detaching ones included
	// readyAt ends the creation: to_create, creating, then ready.
	readyAt time.Time
	// instanceID is the Load Balancer's instance; changedAt is its last
	// configuration change and settledAt when the instance is ready again.
	instanceID           string
	changedAt, settledAt time.Time
	flexIPs              []*flexIPRec
	frontends            []*frontendRec
	backends             []*backendRec
	// held, while not nil, keeps the Load Balancer to_delete past
	// LBDeleteDelay until it is closed (HoldLBDeletion).
	held chan struct{}
}

// lbPNRec is the attachment of a Load Balancer to a Private Network.
type lbPNRec struct {
	pn *pnRec
	ip *ipRecord
	// att is what the attachment attached ip to: detaching leaves alone an
	// IP that the Go API detached and attached to something else since.
	att *attachment
	// dhcp: ip was booked for the attachment (no ipam_ids) and goes with it.
	dhcp                 bool
	createdAt, updatedAt time.Time
	// readyAt ends the attach (pending until then); goneAt, once detached,
	// is when it stops being listed.
	readyAt, goneAt time.Time
}

func (lb *lbRec) statusAt(now time.Time) string {
	switch {
	case lb.status == lbStatusToDelete:
		return lbStatusToDelete
	case !now.Before(lb.readyAt):
		return lbStatusReady
	case now.Sub(lb.createdAt) < lbToCreateFor:
		return lbStatusToCreate
	}
	return lbStatusCreating
}

// ready tells whether the Load Balancer takes configuration changes.
func (lb *lbRec) ready(now time.Time) bool { return lb.statusAt(now) == lbStatusReady }

// touch records a configuration change: the instance is pending until
// settle has passed.
func (lb *lbRec) touch(now time.Time, settle time.Duration) {
	lb.changedAt, lb.settledAt = now, now.Add(settle)
}

// attachment is the live attachment to pnID (not one being detached).
func (lb *lbRec) attachment(pnID string) *lbPNRec {
	for _, lp := range lb.pns {
		if lp.pn.id == pnID && lp.goneAt.IsZero() {
			return lp
		}
	}
	return nil
}

// listedPNs are the attachments a read shows: live ones, and detached
// ones until they are gone, unless the network is attached again (the CCM
// detaches and re-attaches a network whose IPAM IDs changed): the new
// attachment replaces the old one.
func (lb *lbRec) listedPNs(now time.Time) []*lbPNRec {
	var out []*lbPNRec
	for _, lp := range lb.pns {
		switch {
		case lp.goneAt.IsZero():
		case !now.Before(lp.goneAt), lb.attachment(lp.pn.id) != nil:
			continue
		}
		out = append(out, lp)
	}
	return out
}

// --- wire shapes, keys in alphabetical order ---

type lbJSON struct {
	BackendCount          int              `json:"backend_count"`
	CreatedAt             string           `json:"created_at"`
	Description           string           `json:"description"`
	FrontendCount         int              `json:"frontend_count"`
	ID                    string           `json:"id"`
	Instances             []lbInstanceJSON `json:"instances"`
	IP                    []flexIPJSON     `json:"ip"`
	Name                  string           `json:"name"`
	OrganizationID        string           `json:"organization_id"`
	PrivateNetworkCount   int              `json:"private_network_count"`
	ProjectID             string           `json:"project_id"`
	Region                string           `json:"region"`
	RouteCount            int              `json:"route_count"`
	SslCompatibilityLevel string           `json:"ssl_compatibility_level"`
	Status                string           `json:"status"`
	Subscriber            *struct{}        `json:"subscriber"`
	Tags                  []string         `json:"tags"`
	Type                  string           `json:"type"`
	UpdatedAt             string           `json:"updated_at"`
	Zone                  string           `json:"zone"`
}

type lbInstanceJSON struct {
	CreatedAt string `json:"created_at"`
	ID        string `json:"id"`
	IPAddress string `json:"ip_address"`
	Region    string `json:"region"`
	Status    string `json:"status"`
	UpdatedAt string `json:"updated_at"`
	Zone      string `json:"zone"`
}

// lbView says how a Load Balancer is shown: the API leaves its instances
// out where it nests it deep (a frontend's, a frontend's backend's) and in
// the answer to CreateLB, when it has none yet.
type lbView struct {
	region    string
	now       time.Time
	instances bool
}

func (lb *lbRec) json(v lbView) lbJSON {
	updated := lb.updatedAt
	if !v.now.Before(lb.readyAt) && lb.readyAt.After(updated) {
		updated = lb.readyAt
	}
	out := lbJSON{
		BackendCount:          len(lb.backends),
		CreatedAt:             ts(lb.createdAt),
		Description:           lb.description,
		FrontendCount:         len(lb.frontends),
		ID:                    lb.id,
		Instances:             []lbInstanceJSON{},
		IP:                    []flexIPJSON{},
		Name:                  lb.name,
		OrganizationID:        lb.orgID,
		PrivateNetworkCount:   len(lb.listedPNs(v.now)),
		ProjectID:             lb.projectID,
		Region:                v.region,
		SslCompatibilityLevel: lb.sslLevel,
		Status:                lb.statusAt(v.now),
		Tags:                  nonNil(lb.tags),
		Type:                  lb.typ,
		UpdatedAt:             ts(updated),
		Zone:                  lb.zone,
	}
	if v.instances && lb.instanceID != "" {
		out.Instances = append(out.Instances, lb.instanceJSON(v))
	}
	for _, ip := range lb.flexIPs {
		out.IP = append(out.IP, ip.json(v.region))
	}
	return out
}

func (lb *lbRec) instanceJSON(v lbView) lbInstanceJSON {
	status, updated := lbStatusReady, lb.createdAt
	switch {
	case v.now.Before(lb.readyAt):
		status = lbInstanceUnknown
	case v.now.Before(lb.settledAt):
		status, updated = lbInstancePending, lb.changedAt
	default:
		updated = maxTime(lb.readyAt, lb.settledAt, lb.createdAt)
	}
	return lbInstanceJSON{
		CreatedAt: ts(lb.createdAt), ID: lb.instanceID, Region: v.region,
		Status: status, UpdatedAt: ts(updated), Zone: lb.zone,
	}
}

func maxTime(ts ...time.Time) time.Time {
	var m time.Time
	for _, t := range ts {
		if t.After(m) {
			m = t
		}
	}
	return m
}
