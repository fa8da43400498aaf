package ccmprocess

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestArgsRunTheServiceControllerOnlyWithoutListeners(t *testing.T) {
	lone := Options{}.Args("/k")
	for _, want := range []string{"--cloud-provider=scaleway", "--allow-untagged-cloud", "--kubeconfig=/k", "--controllers=service",
		"--secure-port=0", "--webhook-secure-port=0", "--leader-elect=false"} {
		if !slices.Contains(lone, want) {
			t.Errorf("a lone replica's flags %v lack %s", lone, want)
		}
	}
	le := Options{LeaderElection: &LeaderElection{LeaseDuration: 8 * time.Second, RenewDeadline: 6 * time.Second, RetryPeriod: time.Second}}.Args("/k")
	for _, want := range []string{"--leader-elect=true", "--leader-elect-lease-duration=8s", "--leader-elect-renew-deadline=6s", "--leader-elect-retry-period=1s"} {
		if !slices.Contains(le, want) {
			t.Errorf("a replica with leader election: flags %v lack %s", le, want)
		}
	}
	if slices.Contains(le, "--leader-elect=false") {
		t.Errorf("leader election both on and off: %v", le)
	}
}

func TestEnvIsTheCCMsOnlyWithItsRegionFromTheZone(t *testing.T) {
	t.Setenv("SCW_PROFILE", "a-user-profile") // must not reach the CCM
	env := Options{Dir: "/d", APIURL: "http://e", Zone: "nl-ams-2", PrivateNetworkID: "pn", Prefix: "p-"}.Env()
	for _, want := range []string{"SCW_API_URL=http://e", "SCW_DEFAULT_ZONE=nl-ams-2", "SCW_DEFAULT_REGION=nl-ams", "PN_ID=pn",
		"DISABLE_INTERFACES=instances,zones", "DISABLE_TAGS_SYNC=true", "SCW_CCM_PREFIX=p-", "HOME=/d"} {
		if !slices.Contains(env, want) {
			t.Errorf("env %v lacks %s", env, want)
		}
	}
	if slices.ContainsFunc(env, func(kv string) bool { return strings.HasPrefix(kv, "SCW_PROFILE=") }) {
		t.Errorf("the caller's environment leaked into the CCM's: %v", env)
	}
	if got := (Options{}).Env(); !slices.Contains(got, "SCW_DEFAULT_ZONE=fr-par-1") || !slices.Contains(got, "SCW_DEFAULT_REGION=fr-par") {
		t.Errorf("default zone: env %v, want fr-par-1 in fr-par", got)
	}
}

func TestStartWithoutTheBinarySaysHowToBuildIt(t *testing.T) {
	_, err := Start(Options{Binary: filepath.Join(t.TempDir(), "scaleway-cloud-controller-manager"), Dir: t.TempDir(), Name: "x"})
	if err == nil || !strings.Contains(err.Error(), "make tools") {
		t.Fatalf("Start without the binary: %v, want an error naming make tools", err)
	}
}

func TestStopEndsTheProcessGroupAndKeepsTheLog(t *testing.T) {
	dir := t.TempDir()
	// A stand-in binary that prints and sleeps in a child: Stop must end
	// the whole group, not only the shell.
	bin := filepath.Join(dir, "ccm.sh")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\necho started \"$@\"\nsleep 60 &\nwait\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	p, err := Start(Options{Binary: bin, Dir: dir, Name: "r0"})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(p.Tail(5), "started") && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if !strings.Contains(p.Tail(5), "--controllers=service") {
		t.Fatalf("the log %s: %q, want the flags echoed", p.LogPath, p.Tail(5))
	}
	if !p.Leads() {
		t.Error("a replica without leader election does not count as leading")
	}
	p.Stop()
	if exited, _ := p.Exited(); !exited || p.Leads() {
		t.Fatalf("after Stop: exited %v, leads %v", exited, p.Leads())
	}
}

func TestLastLines(t *testing.T) {
	if got := lastLines("a\nb\nc\n", 2); got != "b\nc" {
		t.Errorf("lastLines = %q, want b, c", got)
	}
	if got := lastLines("a\n", 5); got != "a" {
		t.Errorf("lastLines of fewer lines = %q, want a", got)
	}
}
