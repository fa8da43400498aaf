package view

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/scw-lb-ipam/scw-lb-ipam/servicecache"
)

// The API of the view: group scw-lb-ipam.io, version v1alpha1. The chart's
// CustomResourceDefinitions (templates/crds.yaml) are the schema; the
// types here are what the Mirror writes into them.
const (
	Group   = "scw-lb-ipam.io"
	Version = "v1alpha1"
)

// The kinds of the view.
var (
	PoolKind        = schema.GroupVersionKind{Group: Group, Version: Version, Kind: "IPPool"}
	ReservationKind = schema.GroupVersionKind{Group: Group, Version: Version, Kind: "IPReservation"}
)

// The conditions of scw-lb-ipam on a Service, named where the Service
// cache digests them (servicecache.ConditionsDigest).
const (
	// ConditionReserved: every IPAM ID the Service references is known:
	// ours exist and their ledger names this Service, others are named as
	// booked elsewhere.
	ConditionReserved = servicecache.ConditionReserved
	// ConditionApplied: the CCM attached every one of them to the
	// Service's Load Balancer and, where it lists private addresses there,
	// lists them in status.loadBalancer.ingress.
	ConditionApplied = servicecache.ConditionApplied
)

// The conditions of an IPPool.
const (
	// PoolExhausted: no address of the pool is free.
	PoolExhausted = "Exhausted"
	// PoolNetworkMissing: the pool's Private Network is not found.
	PoolNetworkMissing = "NetworkMissing"
)

// The states of an IPReservation.
const (
	// StateLive: a live Service references it.
	StateLive = "Live"
	// StateRetained: no live Service references it; it is kept for its
	// Service's re-create until ReleaseAt.
	StateRetained = "Retained"
	// StatePending: booked for a Service that does not exist yet (its
	// create may still come, or have failed); released after the pending
	// grace.
	StatePending = "Pending"
	// StateStranded: retained, and still attached to a Load Balancer past
	// the convergence grace; never released while attached.
	StateStranded = "Stranded"
)

// ManagedBy is the app.kubernetes.io/managed-by label of every object of
// the view, and the field manager of every write of it.
const ManagedBy = "scw-lb-ipam"

// ReservationStatus is what an IPReservation shows of one reservation of
// this cluster, named by its IPAM ID.
type ReservationStatus struct {
	Address string `json:"address"`
	Pool    string `json:"pool,omitempty"`
	// Service is the name of the Service of the ledger, namespace/name
	// when it lives in another namespace than the object (a Gateway's
	// Service in its controller's namespace).
	Service string `json:"service"`
	State   string `json:"state"`
	// RetainedSince is when no live Service referenced it any more.
	RetainedSince *metav1.Time `json:"retainedSince,omitempty"`
	// ReleaseAt is when the sweeper releases it, if no Service takes it
	// back before.
	ReleaseAt *metav1.Time `json:"releaseAt,omitempty"`
	// AttachedTo is the resource IPAM says holds it: type/ID (name).
	AttachedTo string `json:"attachedTo,omitempty"`
}

// Reservation is one IPReservation to write: its name (the IPAM ID), its
// namespace and status.
type Reservation struct {
	ID        string
	Namespace string
	Status    ReservationStatus
}

// PoolStatus is what an IPPool shows of one pool: the inventory's
// occupancy (scw_lb_ipam_pool_addresses and `status` show the same
// counts; UsedByCluster there is InUse + Retained here).
type PoolStatus struct {
	PrivateNetworkID string   `json:"privateNetworkID"`
	Subnet           string   `json:"subnet"`
	Ranges           []string `json:"ranges,omitempty"`
	// Total is 0 when the pool is too wide to count.
	Total uint64 `json:"total"`
	Free  uint64 `json:"free"`
	// InUse are this cluster's reservations live Services reference, or
	// that wait for their Service.
	InUse uint64 `json:"inUse"`
	// Retained are this cluster's reservations kept for a deleted
	// Service's re-create.
	Retained uint64 `json:"retained"`
	// HeldByOthers are addresses of the pool held by other clusters,
	// resources or people.
	HeldByOthers uint64             `json:"heldByOthers"`
	Conditions   []metav1.Condition `json:"conditions,omitempty"`
}

// ServiceConditions are the conditions to write on one Service; none
// removes those of scw-lb-ipam. Digest is servicecache.ConditionsDigest of
// what the Service carries now: equal to the digest of Conditions, nothing
// is written.
type ServiceConditions struct {
	Namespace, Name string
	UID             string
	Digest          uint32
	// Conditions carry no lastTransitionTime: the Mirror keeps the
	// Service's own where the status does not change.
	Conditions []metav1.Condition
}

// Snapshot is what one cycle of the sweeper saw: the view of it to write.
type Snapshot struct {
	Reservations []Reservation
	Services     []ServiceConditions
}
