package servicecache

import (
	"hash/fnv"
	"slices"
	"strings"
	"time"
	"unique"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/scw-lb-ipam/scw-lb-ipam/ccm"
	"github.com/scw-lb-ipam/scw-lb-ipam/neighbours"
)

// The annotation prefixes of scw-lb-ipam and of the Scaleway CCM: every
// annotation this process reads on a Service starts with one of them.
const (
	annotationPrefix    = "scw-lb-ipam.io/"
	ccmAnnotationPrefix = "service.beta.kubernetes.io/scw-loadbalancer-"
)

// Annotation is one annotation a Record keeps.
type Annotation struct{ Key, Value string }

// Record is what this process reads of a Service held by the Service
// informer (NewInformer), without the corev1.Service around it. The
// informer holds every Service of the cluster for the life of the process:
// a trimmed corev1.Service costs 1,100 B (its struct alone is 640 B, its
// annotations a map), a Record under 400 B.
//
// The readers of Records and what they read:
//   - the index by referenced IPAM IDs (LiveIDs, behind Records.ReferencedBy,
//     the allocator's "who references this ID") and Records.Exists: the
//     type, class, deletion and private-ip-ids, and the key;
//   - the webhook's informer handler that hands the allocator every
//     referenced ID: the key and private-ip-ids;
//   - the webhook's Events held until the Service they describe exists: the
//     reference (Regarding), the creation time and the deletion;
//   - the sweeper's trigger, its cycle, its uid back-fill and the cycle's
//     report of unreserved Services (request.Unreserved): the type, class,
//     deletion, key, UID, resourceVersion and the annotations of scw-lb-ipam
//     and the CCM that make a request;
//   - the Events the sweeper records on a Service: Regarding;
//   - the sweeper's convergence monitor: the CCM's annotations and the IPs
//     of status.loadBalancer.ingress;
//   - the view's writer of the Service's conditions: the digest of the
//     conditions of scw-lb-ipam (Conditions), so that an unchanged one is
//     not written again.
//
// A new reader that needs more must add it here, and to the test that
// compares every reader's answers on a Service and on its Record.
// HasLoadBalancer, ccm.OnlyCCMChanges and request.ProxyProtocolGap read more,
// but only on the Services of an admission request, never on Records.
type Record struct {
	Namespace       string // interned
	Name            string
	UID             types.UID
	ResourceVersion string
	// Annotations are the annotations of scw-lb-ipam and of the CCM (by
	// prefix, so that one read later needs no change here) and the requests
	// in other implementations' words (neighbours.OtherRequestAnnotations), sorted by
	// key.
	Annotations []Annotation
	// Ingress are the IPs of status.loadBalancer.ingress.
	Ingress []string
	// rare holds what few Services carry, nil for the others: a pointer
	// costs every Record 8 B, its fields 40.
	rare *rareFields
	// Created is the creation time in Unix seconds: the apiserver's
	// timestamps have no finer resolution, and uint32 lasts until 2106.
	Created uint32
	// Conditions is ConditionsDigest of the Service's status.conditions: 0
	// when it carries none of scw-lb-ipam's. With it the Record is in the
	// 144 B size class (128 B without).
	Conditions uint32
	flags      uint8
}

const (
	flagServed      uint8 = 1 << iota // the CCM serves it (ccm.Served)
	flagDeleting                      // deletionTimestamp set
	flagDNSReserved                   // external-dns publishes the reserved addresses (neighbours.PublishesReserved)
)

// RecordService is the Service informer's transform (a client-go
// TransformFunc, run on every Service before the informer stores it or
// hands it to an event handler): a Service becomes its Record. Anything
// else, a Record already made included, passes through unchanged.
func RecordService(obj any) (any, error) {
	if svc, ok := obj.(*corev1.Service); ok {
		return NewRecord(svc), nil
	}
	return obj, nil
}

// NewRecord is the Record of svc. Annotation keys, namespaces and the
// annotation values many Services share are interned: held once whatever
// the number of Services.
func NewRecord(svc *corev1.Service) *Record {
	r := &Record{Namespace: intern(svc.Namespace), Name: svc.Name, UID: svc.UID, ResourceVersion: svc.ResourceVersion}
	if c := svc.CreationTimestamp.Unix(); c > 0 {
		r.Created = uint32(c)
	}
	if ccm.Served(svc) {
		r.flags |= flagServed
	}
	if svc.DeletionTimestamp != nil {
		r.flags |= flagDeleting
	}
	if neighbours.PublishesReserved(svc.Annotations) {
		r.flags |= flagDNSReserved
	}
	r.Annotations = recordAnnotations(svc.Annotations, kept)
	if labels := recordAnnotations(svc.Labels, neighbours.GatewayLabel); labels != nil || svc.Spec.LoadBalancerIP != "" {
		r.rare = &rareFields{labels: labels, loadBalancerIP: svc.Spec.LoadBalancerIP}
	}
	for _, in := range svc.Status.LoadBalancer.Ingress {
		if in.IP != "" {
			r.Ingress = append(r.Ingress, in.IP)
		}
	}
	r.Conditions = ConditionsDigest(svc.Status.Conditions)
	return r
}

// The conditions scw-lb-ipam writes on a Service (the view's).
const (
	ConditionReserved = annotationPrefix + "Reserved"
	ConditionApplied  = annotationPrefix + "Applied"
)

// ConditionsDigest is a digest of the conditions of scw-lb-ipam
// (ConditionReserved, ConditionApplied) among conds: their type, status,
// reason and message, in the order of their types. 0 when there are none.
// The writer of the conditions compares the digest of those it would write
// with the Record's: both are made by this one function. Another condition
// of the same prefix, someone else's, is not in it: the writer could never
// remove it, and would try at every cycle.
func ConditionsDigest(conds []metav1.Condition) uint32 {
	var ours []metav1.Condition
	for _, c := range conds {
		if c.Type == ConditionReserved || c.Type == ConditionApplied {
			ours = append(ours, c)
		}
	}
	if len(ours) == 0 {
		return 0
	}
	slices.SortFunc(ours, func(a, b metav1.Condition) int { return strings.Compare(a.Type, b.Type) })
	h := fnv.New32a()
	for _, c := range ours {
		for _, f := range []string{c.Type, string(c.Status), c.Reason, c.Message} {
			_, _ = h.Write([]byte(f))
			_, _ = h.Write([]byte{0})
		}
	}
	return max(h.Sum32(), 1)
}

// recordAnnotations are the entries of ann that kept keeps, sorted by key; nil
// when there are none.
func recordAnnotations(ann map[string]string, kept func(string) bool) []Annotation {
	n := 0
	for k := range ann {
		if kept(k) {
			n++
		}
	}
	if n == 0 {
		return nil
	}
	out := make([]Annotation, 0, n)
	for k, v := range ann {
		if kept(k) {
			if repeats(k) {
				v = intern(v)
			}
			out = append(out, Annotation{Key: intern(k), Value: v})
		}
	}
	slices.SortFunc(out, func(a, b Annotation) int { return strings.Compare(a.Key, b.Key) })
	return out
}

// kept: the annotations of scw-lb-ipam and of the CCM, and the requests
// in other implementations' words and external-dns's (keptOther).
func kept(key string) bool {
	return strings.HasPrefix(key, annotationPrefix) || strings.HasPrefix(key, ccmAnnotationPrefix) || neighbours.RequestAnnotation(key)
}

// repeats: the annotations whose values many Services share (pool names,
// flags, networks) are interned; IDs and addresses are each one Service's.
func repeats(key string) bool {
	switch key {
	case ccm.AnnotationPrivateIPIDs, ccm.AnnotationLoadBalancerID, annotationPrefix + "ipam-ids", annotationPrefix + "addresses", annotationPrefix + "address":
		return false
	}
	return true
}

// intern returns the canonical copy of s: the strings every Service repeats
// are then held once.
func intern(s string) string {
	if s == "" {
		return ""
	}
	return unique.Make(s).Value()
}

// Annotation is the value of a kept annotation, "" when absent.
func (r *Record) Annotation(key string) string {
	i, ok := slices.BinarySearchFunc(r.Annotations, key, func(a Annotation, k string) int { return strings.Compare(a.Key, k) })
	if !ok {
		return ""
	}
	return r.Annotations[i].Value
}

// rareFields are the fields of a Record few Services have.
type rareFields struct {
	// labels are the labels that may carry a Gateway's namespace
	// (keptLabel), sorted by key.
	labels []Annotation
	// loadBalancerIP is spec.loadBalancerIP, a request in other
	// implementations' words.
	loadBalancerIP string
}

// Label is the value of a kept label (keptLabel), "" when absent.
func (r *Record) Label(key string) string {
	if r.rare == nil {
		return ""
	}
	i, ok := slices.BinarySearchFunc(r.rare.labels, key, func(a Annotation, k string) int { return strings.Compare(a.Key, k) })
	if !ok {
		return ""
	}
	return r.rare.labels[i].Value
}

// LoadBalancerIP is spec.loadBalancerIP.
func (r *Record) LoadBalancerIP() string {
	if r.rare == nil {
		return ""
	}
	return r.rare.loadBalancerIP
}

// AnnotationMap is the kept annotations as a fresh map, for the readers
// that parse a request from a Service's annotations.
func (r *Record) AnnotationMap() map[string]string {
	if len(r.Annotations) == 0 {
		return nil
	}
	out := make(map[string]string, len(r.Annotations))
	for _, a := range r.Annotations {
		out[a.Key] = a.Value
	}
	return out
}

// Key is the Service's namespace and name.
func (r *Record) Key() types.NamespacedName {
	return types.NamespacedName{Namespace: r.Namespace, Name: r.Name}
}

// Served is ccm.Served of the Service.
func (r *Record) Served() bool { return r.flags&flagServed != 0 }

// DNSReserved reports whether external-dns publishes the Service's name at
// its reserved addresses (neighbours.PublishesReserved).
func (r *Record) DNSReserved() bool { return r.flags&flagDNSReserved != 0 }

// Deleting reports whether the Service is Terminating.
func (r *Record) Deleting() bool { return r.flags&flagDeleting != 0 }

// Live is ccm.Live of the Service: served and not being deleted.
func (r *Record) Live() bool { return r.Served() && !r.Deleting() }

// CreatedAt is the Service's creation time.
func (r *Record) CreatedAt() time.Time { return time.Unix(int64(r.Created), 0) }

// ReferencedIDs is ccm.ReferencedIDs of the Service.
func (r *Record) ReferencedIDs() []string { return ccm.Items(r.Annotation(ccm.AnnotationPrivateIPIDs)) }

// LiveIDs are the IDs of a live Service, none otherwise: what the index by
// referenced IDs holds.
func (r *Record) LiveIDs() []string {
	if !r.Live() {
		return nil
	}
	return r.ReferencedIDs()
}

// LoadBalancerID is ccm.LoadBalancerID of the Service.
func (r *Record) LoadBalancerID() string {
	return ccm.ParseLoadBalancerID(r.Annotation(ccm.AnnotationLoadBalancerID))
}

// Regarding is the Service as an Event recorded on it names it (the kind
// comes from the scheme): its identity only, a fresh object.
func (r *Record) Regarding() *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: r.Namespace, Name: r.Name, UID: r.UID, ResourceVersion: r.ResourceVersion}}
}

// GetObjectMeta makes a Record a metav1.ObjectMetaAccessor, which is what
// client-go's key functions (through meta.Accessor) ask of what a store
// holds. It allocates a small object per call.
func (r *Record) GetObjectMeta() metav1.Object {
	return &metav1.ObjectMeta{Namespace: r.Namespace, Name: r.Name, UID: r.UID, ResourceVersion: r.ResourceVersion}
}
