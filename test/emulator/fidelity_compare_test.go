package emulator

import (
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"strings"
)

// How the fidelity test (fidelity_test.go) compares an answer of the
// emulator with the recorded one, key by key.

// addedSinceOlderRecordings are keys the API grew after the older
// recordings (2025-06 to 2026-03) were made: the newest one
// (tf-list-ipam-ips-basic, 2026-08) shows them, and the emulator answers as
// the newest API does. Any other key the recordings lack is an error.
func addedSinceOlderRecordings(path string) bool {
	for _, p := range []string{
		"s3_integration_enabled", // VPC
		"transitivity_enabled",   // VPC
		"has_s3_integration",     // Private Network
		"subnets[].region",       // subnet of a Private Network
	} {
		if path == p || strings.HasSuffix(path, "."+p) {
			return true
		}
	}
	return false
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func jsonType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case map[string]any:
		return "object"
	case []any:
		return "array"
	case string:
		return "string"
	case float64:
		return "number"
	case bool:
		return "bool"
	}
	return fmt.Sprintf("%T", v)
}

// compare checks emu against rec: every recorded key is there with the same
// JSON type, recursively, no key is added, and leaf values agree.
func (r *replayer) compare(path string, rec, emu any) {
	r.t.Helper()
	if jsonType(rec) != jsonType(emu) {
		r.errorf("%s: %s (%v), recorded %s (%v)", orRoot(path), jsonType(emu), emu, jsonType(rec), rec)
		return
	}
	switch rv := rec.(type) {
	case map[string]any:
		ev := emu.(map[string]any)
		keys := slices.Sorted(func(yield func(string) bool) {
			for k := range rv {
				if !yield(k) {
					return
				}
			}
		})
		for _, k := range keys {
			e, ok := ev[k]
			if !ok {
				r.errorf("%s: missing", join(path, k))
				continue
			}
			r.compare(join(path, k), rv[k], e)
		}
		for k := range ev {
			if _, ok := rv[k]; !ok && !addedSinceOlderRecordings(join(path, k)) {
				r.errorf("%s: not in the recording", join(path, k))
			}
		}
	case []any:
		ev := emu.([]any)
		if r.instanceBeingAssigned(path, rv, ev) {
			return
		}
		if len(ev) != len(rv) {
			r.errorf("%s: %d elements, recorded %d", orRoot(path), len(ev), len(rv))
			return
		}
		// The length is a value: how many IPs a list has, how many tags.
		r.values++
		r.fields[strings.TrimSuffix(path[strings.LastIndex(path, ".")+1:], "[]")+"[]"]++
		for i := range rv {
			r.compare(path+"[]", rv[i], ev[i])
		}
	default:
		r.leaf(path, rec, emu)
	}
}

func orRoot(path string) string {
	if path == "" {
		return "(body)"
	}
	return path
}

func (r *replayer) leaf(path string, rec, emu any) {
	r.t.Helper()
	key := strings.TrimSuffix(path[strings.LastIndex(path, ".")+1:], "[]")
	rs, isString := rec.(string)
	if r.lbLeaf(path, key, rec, emu) {
		return
	}
	switch {
	case key == "created_at" || key == "updated_at":
		// Generated: same layout, any value.
		if !r.stamp.MatchString(rs) || !r.stamp.MatchString(emu.(string)) {
			r.errorf("%s: %v, recorded %v: not the API's timestamp layout", path, emu, rec)
		}
		r.stamps++
	case key == "organization_id":
		// The account's organization is the recording's environment, not
		// something the API under test generates; the emulator uses its
		// own for projects it does not know.
	case key == "custom_routes_propagation_enabled":
		// The API changed this default between recordings: the 2025-06 one
		// creates VPCs without it (then enables it), later ones with it.
		// The emulator follows the later ones.
	case isString && r.uuid.MatchString(rs):
		r.mapID(path, rs, emu.(string))
	case key == "subnet" && isString && strings.Contains(rs, ":"):
		// The IPv6 /64 IPAM adds is random: check it is one.
		p, err := netip.ParsePrefix(emu.(string))
		if err != nil || p.Bits() != 64 || !netip.MustParsePrefix("fd00::/8").Contains(p.Addr()) {
			r.errorf("%s: %v is not a ULA /64 (recorded %v)", path, emu, rec)
		}
		r.values++
		r.fields[key]++
	default:
		if !reflect.DeepEqual(rec, emu) {
			r.errorf("%s: %v, recorded %v", path, emu, rec)
		}
		r.values++
		r.fields[key]++
	}
}

func (r *replayer) mapID(path, rec, emu string) {
	r.t.Helper()
	r.idChecks++
	if !r.uuid.MatchString(emu) {
		r.errorf("%s: %q is not an ID (recorded %s)", path, emu, rec)
		return
	}
	if known, ok := r.ids[rec]; ok {
		if known != emu {
			r.errorf("%s: %s, but recorded %s stands for %s", path, emu, rec, known)
		}
		return
	}
	if other, taken := r.back[emu]; taken {
		r.errorf("%s: %s stands for both recorded %s and %s", path, emu, other, rec)
		return
	}
	r.ids[rec], r.back[emu] = emu, rec
}
