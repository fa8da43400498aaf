package ipam

import (
	"fmt"
	"time"

	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/scaleway"
)

// Reservation is one IPAM IP as read: the IP, its ledger parsed once where
// the IP entered the process (a listing, GetIP, BookIP, SetTags), and when
// it was read. Every rule judges it; nothing parses the tags again. It is
// never changed once read, as the inventory hands the same one to
// concurrent readers: a write makes a new one (the inventory dates its own
// writes when it records them).
//
// Its Entry is zero and Ours false for an IP that is no reservation of this
// project (another project's, a VM's, a hand-made one): the IP's Resource
// still says who holds the address. The zero Reservation is an address held
// by a booking in flight, its IP not known yet.
//
// Its pool is not resolved here: the pool file reloads, and a reservation
// the inventory keeps would carry a pool that is gone; Config.PoolOf
// resolves it where a rule needs it.
type Reservation struct {
	scaleway.IP
	Entry
	// ReadAt is when it was read: the start of the listing that showed it,
	// the moment the call that answered it was made, or, for a write the
	// inventory recorded, when it recorded it. Zero where nothing is dated
	// from it (a hand-over judges with the clock read before each write).
	ReadAt time.Time
}

// Read is ip as read at at, its ledger parsed.
func Read(ip *scaleway.IP, at time.Time) *Reservation {
	e, ours := ParseEntry(ip.Tags)
	if !ours {
		e = Entry{}
	}
	return &Reservation{IP: *ip, Entry: e, ReadAt: at}
}

// Ours reports whether the tags hold the marker and a cluster: the only
// IPs ever changed. Read keeps the ledger of those alone, so a cluster
// in the entry says it.
func (r *Reservation) Ours() bool { return r.Cluster != "" }

// ReadAll reads every IP of a listing that started at at.
func ReadAll(ips []*scaleway.IP, at time.Time) []*Reservation {
	out := make([]*Reservation, len(ips))
	for i, ip := range ips {
		out[i] = Read(ip, at)
	}
	return out
}

// String names who holds the address for users: what it is attached to,
// else the Service of its ledger, else its ID; nil (a holder the view does
// not know) is "another reservation".
func (r *Reservation) String() string {
	switch {
	case r == nil:
	case r.Resource != nil:
		return r.Resource.String()
	case r.Service.Name != "" && r.Cluster != "":
		return fmt.Sprintf("Service %s (cluster %s)", r.Service, r.Cluster)
	case r.ID != "":
		return "IPAM IP " + r.ID
	}
	return "another reservation"
}
