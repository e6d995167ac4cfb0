//go:build bench

package ebsdriver

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"

	"github.com/stowage-csi/stowage/e2e/ec2sim"
)

const (
	benchLifecycles = 24
	benchInstances  = 4
)

type benchResult struct {
	requests          map[string]float64 // action -> requests per lifecycle
	create, publish   []time.Duration
	failed, completed int
}

// TestBenchEBSLifecycle runs benchLifecycles concurrent volume lifecycles (CreateVolume,
// ControllerPublishVolume, ControllerUnpublishVolume, DeleteVolume) against the EC2 emulator at EC2's real
// delays, once with --batching (Stowage's default) and once without (upstream's code default), and prints
// EC2 requests per lifecycle by action and the CreateVolume / ControllerPublishVolume latencies.
func TestBenchEBSLifecycle(t *testing.T) {
	bin := buildPlugin(t)
	on := runLifecycles(t, bin, true)
	off := runLifecycles(t, bin, false)

	actions := map[string]bool{}
	for a := range on.requests {
		actions[a] = true
	}
	for a := range off.requests {
		actions[a] = true
	}
	names := make([]string, 0, len(actions))
	for a := range actions {
		names = append(names, a)
	}
	sort.Strings(names)
	fmt.Printf("\nEBS volume lifecycles: %d concurrent, %d instances, ec2sim time scale 1.0\n", benchLifecycles, benchInstances)
	fmt.Printf("%-32s %16s %16s\n", "EC2 requests per lifecycle", "--batching=true", "--batching=false")
	var totalOn, totalOff float64
	for _, a := range names {
		fmt.Printf("%-32s %16.2f %16.2f\n", a, on.requests[a], off.requests[a])
		totalOn += on.requests[a]
		totalOff += off.requests[a]
	}
	fmt.Printf("%-32s %16.2f %16.2f\n", "total", totalOn, totalOff)
	fmt.Printf("%-32s %16s %16s\n", "CreateVolume p50", pct(on.create, 50), pct(off.create, 50))
	fmt.Printf("%-32s %16s %16s\n", "CreateVolume p99", pct(on.create, 99), pct(off.create, 99))
	fmt.Printf("%-32s %16s %16s\n", "ControllerPublish p50", pct(on.publish, 50), pct(off.publish, 50))
	fmt.Printf("%-32s %16s %16s\n", "ControllerPublish p99", pct(on.publish, 99), pct(off.publish, 99))
	fmt.Printf("%-32s %16d %16d\n", "lifecycles failed", on.failed, off.failed)
	if on.failed+off.failed > 0 {
		t.Errorf("%d lifecycles failed", on.failed+off.failed)
	}
}

func runLifecycles(t *testing.T, bin string, batching bool) benchResult {
	var instances []ec2sim.Instance
	for i := range benchInstances {
		instances = append(instances, ec2sim.Instance{ID: fmt.Sprintf("i-0bench%011d", i), Zone: testZone, Type: "m5.large"})
	}
	sim, _ := startSim(t, 1.0, instances)
	p := startPlugin(t, bin, pluginEnv(t, sim, "", true), "controller", "--batching="+strconv.FormatBool(batching))
	before := scrapeRequests(t, sim.URL()+"/metrics", "action")
	ctl := csi.NewControllerClient(p.conn)
	res := benchResult{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	capability := &csi.VolumeCapability{AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER}}
	for i := range benchLifecycles {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			node := instances[i%benchInstances].ID
			err := func() error {
				start := time.Now()
				vol, err := ctl.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: fmt.Sprintf("bench-%t-%d", batching, i),
					CapacityRange: &csi.CapacityRange{RequiredBytes: 1 << 30}, VolumeCapabilities: []*csi.VolumeCapability{capability}})
				if err != nil {
					return fmt.Errorf("create: %w", err)
				}
				created := time.Since(start)
				id := vol.GetVolume().GetVolumeId()
				start = time.Now()
				if _, err := ctl.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{VolumeId: id, NodeId: node, VolumeCapability: capability}); err != nil {
					return fmt.Errorf("publish %s: %w", id, err)
				}
				published := time.Since(start)
				if _, err := ctl.ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{VolumeId: id, NodeId: node}); err != nil {
					return fmt.Errorf("unpublish %s: %w", id, err)
				}
				if _, err := ctl.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: id}); err != nil {
					return fmt.Errorf("delete %s: %w", id, err)
				}
				mu.Lock()
				res.create = append(res.create, created)
				res.publish = append(res.publish, published)
				mu.Unlock()
				return nil
			}()
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				t.Logf("lifecycle %d (batching=%t): %v", i, batching, err)
				res.failed++
				return
			}
			res.completed++
		}()
	}
	wg.Wait()
	after := scrapeRequests(t, sim.URL()+"/metrics", "action")
	res.requests = map[string]float64{}
	if res.completed+res.failed > 0 {
		for a, n := range after {
			if d := n - before[a]; d > 0 {
				res.requests[a] = d / float64(res.completed+res.failed)
			}
		}
	}
	return res
}

func pct(ds []time.Duration, p int) string {
	if len(ds) == 0 {
		return "-"
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := (len(s)*p + 99) / 100
	if i < 1 {
		i = 1
	}
	return s[i-1].Round(10 * time.Millisecond).String()
}
