package chart

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/scw-lb-ipam/scw-lb-ipam/request"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/fixtures"
)

// BenchmarkWebhookRSS measures what the chart's resources are sized from:
// the resident memory of the image's binary, run with the chart's
// arguments, while the apiserver sends it 500 concurrent LoadBalancer
// creates (make bench runs it once).
func BenchmarkWebhookRSS(b *testing.B) {
	const creates, workers = 500, 16
	ctx := context.Background()
	emu, _, args, pools, kubeconfig := selfManaged(b, "172.16.33.0-172.16.34.255")
	p := startBinary(b, args, pools, kubeconfig, emu.URL())
	routeWebhook(b, p)
	pid := p.cmd.Process.Pid
	idle := procStatus(b, pid, "VmRSS")

	var peak atomic.Int64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
				if v := procStatus(b, pid, "VmRSS"); v > peak.Load() {
					peak.Store(v)
				}
			}
		}
	}()
	var next, failed atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	start := time.Now()
	for range workers {
		wg.Go(func() {
			for i := next.Add(1); i <= creates; i = next.Add(1) {
				svc := fixtures.Service("payments", fmt.Sprintf("rss-%d", i), map[string]string{request.AnnotationPool: "dc-link"})
				if err := kube.Create(ctx, svc); err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
				}
			}
		})
	}
	wg.Wait()
	wall := time.Since(start)
	close(stop)
	<-sampled
	hwm := procStatus(b, pid, "VmHWM")
	if failed.Load() > 0 {
		b.Fatalf("%d of %d creates failed, the first with: %v", failed.Load(), creates, firstErr.Load())
	}
	// Two lines that make bench prints as rows of its table, under the
	// burst of concurrent creates.
	fmt.Printf("  %-44s %6.1f MiB idle, %.1f MiB peak sampled, %.1f MiB VmHWM\n", "webhook RSS under load (BenchmarkWebhookRSS)", mib(idle), mib(peak.Load()), mib(hwm))
	fmt.Printf("  %-44s the image's binary with the chart's arguments: %d LoadBalancer creates from %d clients in %s\n", "", creates, workers, wall.Round(time.Millisecond))
}

// procStatus reads a kB field of /proc/<pid>/status, in bytes.
func procStatus(tb testing.TB, pid int, field string) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				tb.Fatal(err)
			}
			return kb * 1024
		}
	}
	tb.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }
