package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// start runs the command and returns its output lines up to the "listening"
// one, and a stop function that returns run's error.
func start(t *testing.T, args ...string) ([]string, func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := run(ctx, args, pw, io.Discard)
		_ = pw.CloseWithError(io.EOF)
		done <- err
	}()
	var lines []string
	sc := bufio.NewScanner(pr)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if strings.HasPrefix(sc.Text(), "scw-emulator listening on ") {
			break
		}
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	stop := func() error {
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(5 * time.Second):
			t.Fatal("did not stop")
			return nil
		}
	}
	if len(lines) == 0 || !strings.HasPrefix(lines[len(lines)-1], "scw-emulator listening on http://127.0.0.1:") {
		t.Fatalf("output %q; run: %v", lines, stop())
	}
	return lines, stop
}

func TestServesAndStops(t *testing.T) {
	dir := t.TempDir()
	seed := filepath.Join(dir, "seed.yaml")
	if err := os.WriteFile(seed, []byte(`
privateNetworks:
  - name: nodes
    subnets: [172.16.0.0/22]
ips:
  - privateNetwork: nodes
    address: 172.16.0.9
    tags: [vm]
    resource: {type: instance_server, name: vm-1}
  - privateNetwork: nodes
`), 0o600); err != nil {
		t.Fatal(err)
	}
	lines, stop := start(t, "--listen", "127.0.0.1:0", "--secret-key", "6f5d9a3c-1b2e-4c8d-9e7f-0a1b2c3d4e5f",
		"--seed-config", seed, "--private-network", "lb=10.1.0.0/24,10.2.0.0/24")
	if len(lines) != 5 {
		t.Fatalf("output %q", lines)
	}
	for i, prefix := range []string{"private network nodes id=", "ip 172.16.0.9 id=", "ip 172.16.0.2 id=", "private network lb id="} {
		if !strings.HasPrefix(lines[i], prefix) {
			t.Fatalf("line %d %q, want %s…", i, lines[i], prefix)
		}
	}
	if !strings.Contains(lines[3], "subnets=10.1.0.0/24,10.2.0.0/24,fd") {
		t.Fatalf("subnets: %q", lines[3])
	}
	url := strings.TrimPrefix(lines[4], "scw-emulator listening on ")
	pnID := strings.Fields(strings.TrimPrefix(lines[3], "private network lb "))[0][len("id="):]
	req, _ := http.NewRequest("GET", url+"/vpc/v2/regions/fr-par/private-networks/"+pnID, nil)
	req.Header.Set("X-Auth-Token", "6f5d9a3c-1b2e-4c8d-9e7f-0a1b2c3d4e5f")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET seeded Private Network: %d", resp.StatusCode)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := http.Get(url + "/metadata"); err == nil {
		t.Fatal("still serving after stop")
	}
}

func TestBadArguments(t *testing.T) {
	for _, args := range [][]string{
		{"--private-network", "nocidr"},
		{"--private-network", "a=not-a-cidr"},
		{"--listen", "256.0.0.1:0"},
		{"--seed-config", "/nonexistent.yaml"},
		{"extra"},
	} {
		if err := run(context.Background(), args, io.Discard, io.Discard); err == nil {
			t.Errorf("%q: no error", args)
		}
	}
}
