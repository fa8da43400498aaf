package testenv

import "testing"

// A Start that fails before the control plane is up stops what it started
// (the emulator, the temporary directory) and returns its error: stopping
// the replicas must not reach for the egress proxy, which does not exist
// yet.
func TestStartFailingBeforeTheControlPlane(t *testing.T) {
	e, err := Start(Options{PrivateNetworks: []string{"nodes=not-a-cidr"}})
	if err == nil {
		e.Stop()
		t.Fatal("Start with a malformed subnet: no error")
	}
}
