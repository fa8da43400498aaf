package webhook

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/google/uuid"

	"github.com/scw-lb-ipam/scw-lb-ipam/ccm"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
)

// maxListItems bounds comma lists: the CCM takes one IP per Private Network,
// and no LB is attached to more than a handful.
const maxListItems = 8

// request is what a Service's annotations ask for.
type request struct {
	Pools     []string
	Addresses []netip.Addr
	IDs       []string // scw-lb-ipam.io/ipam-ids
	RawIDs    []string // private-ip-ids written by hand
	PNIDs     []string // pn-ids as the user set them
	// Recorded are the addresses an earlier admission wrote (a restored
	// manifest carries them), read leniently: they only guide a fallback.
	Recorded      []netip.Addr
	AllowIPChange bool
	// ExternallyManaged: the CCM's externally-managed annotation is "true".
	ExternallyManaged bool
}

// empty reports a Service that asks for nothing of its own.
func (r request) empty() bool {
	return len(r.Pools) == 0 && len(r.Addresses) == 0 && len(r.IDs) == 0
}

// sameAsk reports whether two requests ask for the same thing; the written
// annotations do not count.
func (r request) sameAsk(o request) bool {
	return slices.Equal(r.Pools, o.Pools) && slices.Equal(r.Addresses, o.Addresses) && slices.Equal(r.IDs, o.IDs)
}

// annotationError is a denial about one annotation's value.
type annotationError struct {
	Annotation, Value, Problem string
	// Err is the refusal behind Problem, if any (for its reason).
	Err error
}

func (e *annotationError) Unwrap() error { return e.Err }

func (e *annotationError) Error() string {
	return fmt.Sprintf("annotation %s: value %q: %s", e.Annotation, truncate(e.Value), e.Problem)
}

// parseRequest reads the annotations strictly: every list item must parse,
// nothing is silently dropped.
func parseRequest(ann map[string]string) (request, error) {
	var r request
	var err error
	if r.Pools, err = list(ann, ccm.AnnotationPool, func(s string) error {
		if !ipam.IsName(s) {
			return fmt.Errorf("%q is not a pool name (lower-case letters, digits and '-')", truncate(s))
		}
		return nil
	}); err != nil {
		return r, err
	}
	addrs, err := list(ann, ccm.AnnotationAddress, func(s string) error {
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
	isID := func(s string) error {
		if uuid.Validate(s) != nil {
			return fmt.Errorf("%q is not an IPAM IP ID (a UUID such as 8a7ff36c-7e00-441f-bfda-b6bdcb8ecc5f)", truncate(s))
		}
		return nil
	}
	if r.IDs, err = list(ann, ccm.AnnotationIPAMIDs, isID); err != nil {
		return r, err
	}
	if r.RawIDs, err = list(ann, ccm.AnnotationPrivateIPIDs, isID); err != nil {
		return r, err
	}
	if r.PNIDs, err = list(ann, ccm.AnnotationPNIDs, func(s string) error {
		// The CCM accepts zonal IDs as "zone/uuid"; keep them as written.
		_, id, _ := strings.Cut(s, "/")
		if id == "" {
			id = s
		}
		if uuid.Validate(id) != nil {
			return fmt.Errorf("%q is not a Private Network ID", truncate(s))
		}
		return nil
	}); err != nil {
		return r, err
	}
	for _, s := range strings.Split(ann[ccm.AnnotationAddresses], ",") {
		if a, perr := netip.ParseAddr(strings.TrimSpace(s)); perr == nil {
			r.Recorded = append(r.Recorded, a)
		}
	}
	r.ExternallyManaged = ann[ccm.AnnotationExternallyManaged] == "true"
	switch v := ann[ccm.AnnotationAllowIPChange]; v {
	case "", "false":
	case "true":
		r.AllowIPChange = true
	default:
		return r, &annotationError{ccm.AnnotationAllowIPChange, v, `must be "true" or "false"`, nil}
	}
	if len(r.IDs) > 0 && (len(r.Pools) > 0 || len(r.Addresses) > 0) {
		return r, &annotationError{ccm.AnnotationIPAMIDs, ann[ccm.AnnotationIPAMIDs], "cannot be combined with " + ccm.AnnotationPool + " or " + ccm.AnnotationAddress + ": either bring your own IPAM IDs or let a pool reserve them; remove one", nil}
	}
	return r, nil
}

// list splits a comma list, trimming spaces, refusing empty items,
// duplicates and overly long lists.
func list(ann map[string]string, key string, check func(string) error) ([]string, error) {
	v, ok := ann[key]
	if !ok {
		return nil, nil
	}
	if strings.TrimSpace(v) == "" {
		return nil, &annotationError{key, v, "is empty; remove the annotation or give a value", nil}
	}
	parts := strings.Split(v, ",")
	if len(parts) > maxListItems {
		return nil, &annotationError{key, v, fmt.Sprintf("has %d items; at most %d are allowed (one per Private Network)", len(parts), maxListItems), nil}
	}
	out := make([]string, 0, len(parts))
	for _, p := range parts {
		p = strings.TrimSpace(p)
		if p == "" {
			return nil, &annotationError{key, v, "has an empty item; separate items with single commas", nil}
		}
		if err := check(p); err != nil {
			return nil, &annotationError{key, v, err.Error(), nil}
		}
		if slices.Contains(out, p) {
			return nil, &annotationError{key, v, fmt.Sprintf("lists %q twice", truncate(p)), nil}
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
