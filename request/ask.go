package request

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/scw-lb-ipam/scw-lb-ipam/ccm"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
	"github.com/scw-lb-ipam/scw-lb-ipam/servicecache"
)

// The label and annotations of scw-lb-ipam on Services and namespaces: this
// project's own, which the CCM never reads. The CCM's are in package ccm.
const (
	// LabelEnabled opts a namespace in. Namespaces without it are never touched.
	LabelEnabled = "scw-lb-ipam.io/enabled"

	// AnnotationPool names the pool, or pools on distinct Private Networks.
	AnnotationPool = "scw-lb-ipam.io/pool"
	// AnnotationAddress asks for specific addresses, one per Private Network.
	AnnotationAddress = "scw-lb-ipam.io/address"
	// AnnotationIPAMIDs passes pre-reserved IPAM IP IDs through, validated.
	AnnotationIPAMIDs = "scw-lb-ipam.io/ipam-ids"
	// AnnotationAllowIPChange lets an UPDATE move a live Service to new IPs:
	// the CCM then re-attaches the Load Balancer (a brief outage).
	AnnotationAllowIPChange = "scw-lb-ipam.io/allow-ip-change"
	// AnnotationAddresses is written back: the reserved addresses, readable
	// before the Load Balancer exists.
	AnnotationAddresses = "scw-lb-ipam.io/addresses"
)

// maxListItems bounds comma lists: the CCM takes one IP per Private Network,
// and no LB is attached to more than a handful.
const maxListItems = 8

// Ask is what a Service's annotations ask for.
type Ask struct {
	Pools     []string
	Addresses []netip.Addr
	IDs       []string // scw-lb-ipam.io/ipam-ids
	RawIDs    []string // private-ip-ids written by hand
	PNIDs     []string // pn-ids as the user set them
	// Recorded are the addresses an earlier admission wrote (a restored
	// manifest carries them), read leniently: they only guide a fallback.
	Recorded      []netip.Addr
	AllowIPChange bool
	// ExternallyManaged: the CCM reads its externally-managed annotation
	// as true (ccm.ExternallyManaged).
	ExternallyManaged bool
	// PoolsFrom and PoolsValue are the word and value Pools were read from
	// when another implementation's word asked (Translate), and
	// AddressesFrom and AddressesValue those of Addresses: a denial names
	// what the user wrote (InWords). Empty for this project's annotations.
	PoolsFrom, PoolsValue         string
	AddressesFrom, AddressesValue string
}

// Empty reports a Service that asks for nothing of its own.
func (r Ask) Empty() bool {
	return len(r.Pools) == 0 && len(r.Addresses) == 0 && len(r.IDs) == 0
}

// Same reports whether two requests ask for the same reservations,
// compared as sets: reordering pools or IDs is no change, and neither is
// pinning or unpinning an address the Service holds now (current, the
// addresses an earlier admission wrote). The written annotations do not
// count.
func (r Ask) Same(o Ask, current []netip.Addr) bool {
	if !sets.New(r.Pools...).Equal(sets.New(o.Pools...)) || !sets.New(r.IDs...).Equal(sets.New(o.IDs...)) {
		return false
	}
	changed := sets.New(r.Addresses...).SymmetricDifference(sets.New(o.Addresses...))
	return sets.New(current...).IsSuperset(changed)
}

// canonicalUUID reports the form the CCM and the Scaleway API take as it
// is: 36 lower-case characters with dashes. uuid.Validate alone also takes
// upper case, braces, urn:uuid: and no dashes.
func canonicalUUID(s string) bool {
	u, err := uuid.Parse(s)
	return err == nil && u.String() == s
}

// AnnotationError is a denial about one annotation's value.
type AnnotationError struct {
	Annotation, Value, Problem string
	// Err is the refusal behind Problem, if any (for its reason).
	Err error
}

func (e *AnnotationError) Unwrap() error { return e.Err }

func (e *AnnotationError) Error() string {
	what := "annotation"
	if strings.HasPrefix(e.Annotation, "spec.") {
		what = "field" // spec.loadBalancerIP, read as an address
	}
	return fmt.Sprintf("%s %s: value %q: %s", what, e.Annotation, truncate(e.Value), e.Problem)
}

// Read is the request of a Service with annotations ann and
// spec.loadBalancerIP lbIP, judged for namespace (JudgedNamespace):
// Translate, then Parse.
func Read(cfg *ipam.Config, namespace string, ann map[string]string, lbIP string) (Ask, Translation, error) {
	t, err := Translate(cfg, namespace, ann, lbIP)
	if err != nil {
		return Ask{}, t, err
	}
	ask, err := Parse(t.Annotations)
	ask.PoolsFrom, ask.PoolsValue = t.poolsFrom, t.poolsValue
	ask.AddressesFrom, ask.AddressesValue = t.addrsFrom, t.addrsValue
	return ask, t, ask.InWords(err)
}

// Parse reads the annotations strictly: every list item must parse,
// nothing is silently dropped.
func Parse(ann map[string]string) (Ask, error) {
	var r Ask
	var err error
	// First: an UPDATE compares with these even when the old object's
	// other annotations no longer parse.
	for _, s := range ccm.Items(ann[AnnotationAddresses]) {
		if a, perr := netip.ParseAddr(s); perr == nil {
			r.Recorded = append(r.Recorded, a)
		}
	}
	if r.Pools, err = list(ann, AnnotationPool, func(s string) error {
		if !ipam.IsName(s) {
			return fmt.Errorf("%q is not a pool name (lower-case letters, digits and '-')", truncate(s))
		}
		return nil
	}); err != nil {
		return r, err
	}
	addrs, err := list(ann, AnnotationAddress, func(s string) error {
		if _, perr := netip.ParseAddr(s); perr != nil {
			return fmt.Errorf("%q is not an IP address; write addresses such as 172.16.4.210, comma-separated, one per Private Network", truncate(s))
		}
		return nil
	})
	if err != nil {
		return r, err
	}
	for _, a := range addrs {
		r.Addresses = append(r.Addresses, netip.MustParseAddr(a))
	}
	if err := r.parseIDs(ann); err != nil {
		return r, err
	}
	r.ExternallyManaged = ccm.ExternallyManaged(ccm.Of(ann))
	switch v := ann[AnnotationAllowIPChange]; v {
	case "", "false":
	case "true":
		r.AllowIPChange = true
	default:
		return r, &AnnotationError{AnnotationAllowIPChange, v, `must be "true" or "false"`, nil}
	}
	if len(r.IDs) > 0 && (len(r.Pools) > 0 || len(r.Addresses) > 0) {
		return r, &AnnotationError{AnnotationIPAMIDs, ann[AnnotationIPAMIDs], "cannot be combined with " + AnnotationPool + " or " + AnnotationAddress + ": either bring your own IPAM IDs or let a pool reserve them; remove one", nil}
	}
	return r, nil
}

// parseIDs reads the ID lists: IPAM IDs, private-ip-ids and pn-ids.
func (r *Ask) parseIDs(ann map[string]string) error {
	var err error
	if r.IDs, err = list(ann, AnnotationIPAMIDs, ipamID); err != nil {
		return err
	}
	if r.RawIDs, err = list(ann, ccm.AnnotationPrivateIPIDs, ipamID); err != nil {
		return err
	}
	if err := pnIDsSpacing(ann); err != nil {
		return err
	}
	r.PNIDs, err = list(ann, ccm.AnnotationPNIDs, pnItem)
	return err
}

// ipamID checks one IPAM IP ID, as the CCM passes it to the Scaleway API.
func ipamID(s string) error {
	if !canonicalUUID(s) {
		return fmt.Errorf("%q is not an IPAM IP ID in canonical form (36 lower-case characters, such as 8a7ff36c-7e00-441f-bfda-b6bdcb8ecc5f): the CCM passes each item to the Scaleway API as it is; write the ID as scw ipam ip list prints it", truncate(s))
	}
	return nil
}

// list splits a comma list, trimming spaces, refusing empty items,
// duplicates and overly long lists.
func list(ann map[string]string, key string, check func(string) error) ([]string, error) {
	v, ok := ann[key]
	if !ok {
		return nil, nil
	}
	if strings.TrimSpace(v) == "" {
		return nil, &AnnotationError{key, v, "is empty; remove the annotation or give a value", nil}
	}
	parts := strings.Split(v, ",")
	if len(parts) > maxListItems {
		return nil, &AnnotationError{key, v, fmt.Sprintf("has %d items; at most %d are allowed (one per Private Network)", len(parts), maxListItems), nil}
	}
	out := make([]string, 0, len(parts))
	for _, p := range parts {
		p = strings.TrimSpace(p)
		if p == "" {
			return nil, &AnnotationError{key, v, "has an empty item; separate items with single commas", nil}
		}
		if err := check(p); err != nil {
			return nil, &AnnotationError{key, v, err.Error(), nil}
		}
		if slices.Contains(out, p) {
			return nil, &AnnotationError{key, v, fmt.Sprintf("lists %q twice", truncate(p)), nil}
		}
		out = append(out, p)
	}
	return out, nil
}

// truncate keeps denials readable when someone pastes a huge value.
func truncate(s string) string {
	if len(s) > 200 {
		return s[:200] + "…"
	}
	return s
}

// OptedIn reads a namespace's opt-in label (LabelEnabled) through r; a nil
// r opts every namespace in. A namespace that cannot be read is an error,
// never a "no": the caller decides whether to ask again elsewhere.
func OptedIn(ctx context.Context, r client.Reader, namespace string) (bool, error) {
	if r == nil {
		return true, nil
	}
	ns := &corev1.Namespace{}
	if err := r.Get(ctx, client.ObjectKey{Name: namespace}, ns); err != nil {
		return false, err
	}
	return ns.Labels[LabelEnabled] == "true", nil
}

// GatewayOptedIn reads the opt-in label of the namespace ns a Gateway's
// label names, through each reader in turn (a cache, then the apiserver)
// until one says it opted in. A namespace the last reader does not have is
// a stale label: not opted in. Any other failure is an error, never a "no".
// The webhook and the sweeper's report both judge a Gateway's Service by it.
func GatewayOptedIn(ctx context.Context, ns string, readers ...client.Reader) (bool, error) {
	var err error
	for _, r := range readers {
		var opted bool
		if opted, err = OptedIn(ctx, r, ns); err == nil && opted {
			return true, nil
		}
	}
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	return false, err
}

// Unreserved reports whether a live LoadBalancer Service that carries no
// private-ip-ids should have had a reservation: it is in scope, in a
// namespace neither excluded nor left out (namespaces reads the opt-in
// label), and asks for one or falls under a default pool. what names the
// request for the report. The rules are the webhook's own: a Service it
// would have reserved for is one the sweeper reports. svc is the Service's
// Record, as the sweeper's cycle reads it.
func Unreserved(ctx context.Context, cfg *ipam.Config, namespaces client.Reader, excluded []string, svc *servicecache.Record) (bool, string, error) {
	if !svc.Served() || slices.Contains(excluded, svc.Namespace) {
		return false, "", nil
	}
	opted, err := OptedIn(ctx, namespaces, svc.Namespace)
	if err != nil || !opted {
		return false, "", err
	}
	ns := JudgedNamespace(cfg, svc.Namespace, svc.Label)
	if ns != svc.Namespace {
		// A Gateway's namespace must have opted in too, as at admission.
		if opted, err := GatewayOptedIn(ctx, ns, namespaces); err != nil || !opted {
			return false, "", err
		}
	}
	ask, _, err := Read(cfg, ns, svc.AnnotationMap(), svc.LoadBalancerIP())
	if err != nil {
		return false, "", nil
	}
	p, err := NewPlan(cfg, ns, ask)
	if err != nil || p == nil {
		return false, "", nil
	}
	return true, p.Describe(), nil
}
