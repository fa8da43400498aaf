package request

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/scw-lb-ipam/scw-lb-ipam/ccm"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
	"github.com/scw-lb-ipam/scw-lb-ipam/neighbours"
)

// Requests in other implementations' words (neighbours.OtherRequestAnnotations
// and spec.loadBalancerIP), read as this project's own: users moving to
// Scaleway, and Gateway controllers that turn a Gateway's addresses into
// spec.loadBalancerIP, ask that way.

// poolWords are the annotations that name pools; the others list addresses.
var poolWords = []string{neighbours.AnnotationMetalLBPool, neighbours.AnnotationMetalLBPoolLegacy, neighbours.AnnotationCalicoPools}

// fieldLoadBalancerIP names spec.loadBalancerIP in warnings and denials.
const fieldLoadBalancerIP = "spec.loadBalancerIP"

// Translation is a Service's request with other implementations' words
// read as this project's own.
type Translation struct {
	// Annotations are the Service's, with the translated request under
	// AnnotationPool and AnnotationAddress; the Service's own map when
	// nothing was translated. Never written back: each admission reads the
	// words again, so a re-apply that keeps them asks for the same.
	Annotations map[string]string
	// ClearLoadBalancerIP: spec.loadBalancerIP was read; the admission
	// clears it, as the CCM refuses it on a private Load Balancer.
	ClearLoadBalancerIP bool
	// Warnings name what was translated, or ignored.
	Warnings []string
	// poolsFrom and poolsValue, addrsFrom and addrsValue: the words the
	// pool names and the addresses were read from, and their values.
	poolsFrom, poolsValue string
	addrsFrom, addrsValue string
}

// foreign is what the other words ask for, and which of them asked.
type foreign struct {
	pools, addrs []string
	poolFrom     string
	addrFrom     string
	keys         []string
}

// Translate reads the other words of ann and lbIP as AnnotationPool and
// AnnotationAddress, unless the pool file turns translation off. A pool
// name is a pool when the pool file has one of that name, otherwise a
// denial naming the pools namespace may use; words that disagree are a
// denial; this project's own request annotations win over every other
// word, with a warning. spec.loadBalancerIP is read when the Load Balancer
// is private or the address is in a pool's subnet: otherwise it is a
// public IP, the CCM's business.
func Translate(cfg *ipam.Config, namespace string, ann map[string]string, lbIP string) (Translation, error) {
	t := Translation{Annotations: ann}
	other := lbIP != ""
	for _, key := range neighbours.OtherRequestAnnotations {
		if _, ok := ann[key]; ok {
			other = true
			break
		}
	}
	if !other {
		return t, nil // no other words: nothing to read
	}
	if !cfg.Translates() {
		return t, nil
	}
	if own := ownRequest(ann); own != "" {
		return ignored(cfg, ann, lbIP, own), nil
	}
	var f foreign
	for _, key := range neighbours.OtherRequestAnnotations {
		if v, ok := ann[key]; ok {
			if err := f.add(key, v); err != nil {
				return t, err
			}
		}
	}
	if lbIP != "" && privateAddress(cfg, ann, lbIP) {
		if err := f.add(fieldLoadBalancerIP, lbIP); err != nil {
			return t, err
		}
		t.ClearLoadBalancerIP = true
	}
	if len(f.keys) == 0 {
		return t, nil
	}
	t.Annotations = f.annotations(ann)
	t.Warnings = append(t.Warnings, f.warnings()...)
	t.poolsFrom, t.poolsValue = f.poolFrom, ann[f.poolFrom]
	t.addrsFrom, t.addrsValue = f.addrFrom, ann[f.addrFrom]
	if f.addrFrom == fieldLoadBalancerIP {
		t.addrsValue = lbIP
	}
	if t.ClearLoadBalancerIP {
		t.Warnings = append(t.Warnings, clearedWarning(lbIP))
	}
	return t, nil
}

// ignored is the translation of a Service that sets this project's own
// request annotation own: every other word is ignored, unread (a leftover
// one may name a pool the file no longer has), with a warning;
// spec.loadBalancerIP of a private address is still cleared, as the CCM
// refuses it on a private Load Balancer.
func ignored(cfg *ipam.Config, ann map[string]string, lbIP, own string) Translation {
	t := Translation{Annotations: ann}
	var keys []string
	for _, key := range neighbours.OtherRequestAnnotations {
		if _, ok := ann[key]; ok {
			keys = append(keys, key)
		}
	}
	if lbIP != "" && privateAddress(cfg, ann, lbIP) {
		keys = append(keys, fieldLoadBalancerIP)
		t.ClearLoadBalancerIP = true
	}
	if len(keys) > 0 {
		t.Warnings = append(t.Warnings, fmt.Sprintf("scw-lb-ipam: %s is ignored: annotation %s is set, and this project's own request wins", strings.Join(keys, ", "), own))
	}
	if t.ClearLoadBalancerIP {
		t.Warnings = append(t.Warnings, clearedWarning(lbIP))
	}
	return t
}

func clearedWarning(lbIP string) string {
	return fmt.Sprintf("scw-lb-ipam: %s %s is cleared: the Scaleway CCM refuses it on a private Load Balancer (it only handles static public IPs); the reserved address is written in %s", fieldLoadBalancerIP, lbIP, AnnotationAddresses)
}

// privateAddress: spec.loadBalancerIP asks for a private address when
// the Load Balancer is private, or when a pool's subnet holds it.
func privateAddress(cfg *ipam.Config, ann map[string]string, lbIP string) bool {
	if ccm.Private(ccm.Of(ann)) {
		return true
	}
	a, err := netip.ParseAddr(lbIP)
	return err == nil && slices.ContainsFunc(cfg.Pools, func(p *ipam.Pool) bool { return p.Prefix().Contains(a) })
}

// InWords is err as the user wrote the request: a refusal of
// AnnotationPool or AnnotationAddress that was read from another word
// names that word and its value, and its fix ("omit …", "remove …") is
// written in it. Any other error is returned as it is. Argo CD and Flux
// show the denial and not the warning naming the translation, so the
// denial must stand on its own.
func (r Ask) InWords(err error) error {
	var ae *AnnotationError
	if !errors.As(err, &ae) {
		return err
	}
	word, value := "", ""
	switch ae.Annotation {
	case AnnotationPool:
		word, value = r.PoolsFrom, r.PoolsValue
	case AnnotationAddress:
		word, value = r.AddressesFrom, r.AddressesValue
	}
	if word == "" {
		return err
	}
	return &AnnotationError{Annotation: word, Value: value, Problem: strings.ReplaceAll(ae.Problem, ae.Annotation, word), Err: ae.Err}
}

// ownRequest is the first of this project's request annotations ann sets.
func ownRequest(ann map[string]string) string {
	for _, k := range []string{AnnotationPool, AnnotationAddress, AnnotationIPAMIDs} {
		if _, ok := ann[k]; ok {
			return k
		}
	}
	return ""
}

// add reads one word: its items must be pool names or addresses, and ask
// for what the words read before asked, if any. Pool names are looked up
// where scw-lb-ipam.io/pool's are, by the plan: an UPDATE that asks for
// the same as before is no change even after the pool's rename, as with
// this project's own annotation.
func (f *foreign) add(key, v string) error {
	items, err := wordItems(key, v)
	if err != nil {
		return err
	}
	pools := slices.Contains(poolWords, key)
	for _, s := range items {
		if !pools {
			if _, perr := netip.ParseAddr(s); perr != nil {
				return &AnnotationError{key, v, fmt.Sprintf("read as %s, but %q is not an IP address; write addresses such as 172.16.4.210", AnnotationAddress, truncate(s)), nil}
			}
		}
	}
	have, from := &f.addrs, &f.addrFrom
	if pools {
		have, from = &f.pools, &f.poolFrom
	}
	if *from != "" && !sets.New(*have...).Equal(sets.New(items...)) {
		return &AnnotationError{key, v, fmt.Sprintf("asks for %s, but %s asks for %s; they disagree, keep one", strings.Join(items, ","), *from, strings.Join(*have, ",")), nil}
	}
	if *from == "" {
		*have, *from = items, key
	}
	f.keys = append(f.keys, key)
	return nil
}

// wordItems splits a word's value: a JSON list (Calico's form) or a comma
// list (the others'), each item trimmed, none empty or repeated.
func wordItems(key, v string) ([]string, error) {
	var items []string
	if strings.HasPrefix(strings.TrimSpace(v), "[") {
		if err := json.Unmarshal([]byte(v), &items); err != nil {
			return nil, &AnnotationError{key, v, `is not a JSON list of strings such as ["172.16.4.210"]`, nil}
		}
	} else {
		items = strings.Split(v, ",")
	}
	out := make([]string, 0, len(items))
	for _, s := range items {
		s = strings.TrimSpace(s)
		if s == "" || slices.Contains(out, s) {
			return nil, &AnnotationError{key, v, "has an empty or repeated item; list each item once", nil}
		}
		out = append(out, s)
	}
	if len(out) > maxListItems {
		return nil, &AnnotationError{key, v, fmt.Sprintf("has %d items; at most %d are allowed (one per Private Network)", len(out), maxListItems), nil}
	}
	return out, nil
}

// annotations are ann with the translated request in this project's
// words, a fresh map.
func (f *foreign) annotations(ann map[string]string) map[string]string {
	out := make(map[string]string, len(ann)+2)
	for k, v := range ann {
		out[k] = v
	}
	if f.poolFrom != "" {
		out[AnnotationPool] = strings.Join(f.pools, ",")
	}
	if f.addrFrom != "" {
		out[AnnotationAddress] = strings.Join(f.addrs, ",")
	}
	return out
}

// warnings name each word read and what it was read as.
func (f *foreign) warnings() []string {
	out := make([]string, 0, len(f.keys))
	for _, k := range f.keys {
		as, v := AnnotationAddress, strings.Join(f.addrs, ",")
		if slices.Contains(poolWords, k) {
			as, v = AnnotationPool, strings.Join(f.pools, ",")
		}
		out = append(out, fmt.Sprintf("scw-lb-ipam: %s is read as %s: %q", k, as, v))
	}
	return out
}
