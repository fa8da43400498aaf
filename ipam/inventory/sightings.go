package inventory

import (
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// sightings are IPAM IDs seen on Services, and when last.
type sightings map[types.NamespacedName]map[string]time.Time

func (s sightings) add(svc types.NamespacedName, ids []string, at time.Time) {
	m := s[svc]
	if m == nil {
		m = map[string]time.Time{}
		s[svc] = m
	}
	for _, id := range ids {
		m[id] = at
	}
}

// drop forgets id on svc, or on every Service when svc is nil.
func (s sightings) drop(svc *types.NamespacedName, id string) {
	for key, m := range s {
		if svc != nil && key != *svc {
			continue
		}
		delete(m, id)
		if len(m) == 0 {
			delete(s, key)
		}
	}
}

// dropBefore forgets the sightings older than since that settled says are
// settled.
func (s sightings) dropBefore(since time.Time, settled func(id string) bool) {
	for svc, m := range s {
		for id, at := range m {
			if at.Before(since) && settled(id) {
				delete(m, id)
			}
		}
		if len(m) == 0 {
			delete(s, svc)
		}
	}
}
