package emulator

import (
	"time"

	"k8s.io/utils/clock"
)

// cloud is what the emulated APIs share: the objects of the region served,
// the lock over them, the clock, and the options. Each API type holds a
// pointer to it; the state changes more than one API makes (booking,
// attaching, detaching and releasing IPs) are its methods, run under mu.
type cloud struct {
	opts  Options
	clock clock.PassiveClock

	// mu guards st, the emulated Scaleway objects and the audit log; every
	// write lock moves its generation on (see stateMutex).
	mu stateMutex
	st state

	// done is closed by Server.Close: injected delays and pending Load
	// Balancer removals end.
	done chan struct{}
}

// newCloud holds the default project only; opts has its defaults set.
func newCloud(opts Options) *cloud {
	cl := &cloud{opts: opts, clock: opts.Clock, st: newState(), done: make(chan struct{})}
	now := cl.now()
	cl.st.projects[opts.ProjectID] = &project{
		id: opts.ProjectID, name: "default", orgID: opts.OrganizationID,
		createdAt: now, updatedAt: now,
	}
	return cl
}

func (cl *cloud) now() time.Time {
	// The API shows microseconds; truncating here keeps what the SDK parses
	// equal to what the emulator holds.
	return cl.clock.Now().UTC().Truncate(time.Microsecond)
}

// projectOrgLocked is the organization of projectID: its own when the
// emulator knows the project, else the configured one.
func (cl *cloud) projectOrgLocked(projectID string) string {
	if p := cl.st.projects[projectID]; p != nil {
		return p.orgID
	}
	return cl.opts.OrganizationID
}
