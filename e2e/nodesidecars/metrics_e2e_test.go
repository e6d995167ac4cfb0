//go:build e2e

package nodesidecars

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	csimetrics "github.com/kubernetes-csi/csi-lib-utils/metrics"

	"github.com/stowage-csi/stowage/e2e/csimock"
	"github.com/stowage-csi/stowage/e2e/metricsparity"
	"github.com/stowage-csi/stowage/e2e/rig"
)

const driverName = "mock.csi.stowage.io"

// start builds command of node-sidecars and runs it with args against a fresh mock driver; both stop when the
// test ends, and a failed test shows the command's log.
func start(t *testing.T, ctx context.Context, command string, args ...string) *rig.Process {
	t.Helper()
	root, err := rig.RepoRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	bin, err := rig.BuildCommand(ctx, root, "node-sidecars", command, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	drv, err := csimock.Start(ctx, csimock.Options{Name: driverName})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(drv.Stop)
	p, err := rig.Start(rig.Spec{Name: command, Path: bin, LogDir: t.TempDir(),
		Args: append([]string{"--csi-address=" + drv.Endpoint()}, args...), Env: []string{"PATH=" + os.Getenv("PATH")}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Stop(5 * time.Second)
		if t.Failed() {
			t.Logf("%s log (tail):\n%s", command, p.Tail(40))
		}
	})
	return p
}

// TestE2ELivenessProbeMetricsParity: upstream's livenessprobe serves, at --http-endpoint's --metrics-path, the
// registry of csi-lib-utils' CSIMetricsManager and nothing else; no upstream build of it can be made here (its
// module is refused by the module proxy), so the want side is that same library's registry, with the call a
// /healthz makes recorded in it. Stowage's binary, after one /healthz, must serve every family of it with the
// same labels, buckets and CSI method and code values.
func TestE2ELivenessProbeMetricsParity(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	addr := rig.FreeAddr(t)
	start(t, ctx, "livenessprobe", "--http-endpoint="+addr)
	rig.Eventually(t, ctx, time.Minute, "livenessprobe's /healthz answers ok", func(ctx context.Context) (bool, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/healthz", nil)
		if err != nil {
			return false, err
		}
		rsp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false, nil // not listening yet
		}
		rsp.Body.Close()
		return rsp.StatusCode == http.StatusOK, nil
	})
	got := metricsparity.Scrape(t, ctx, "http://"+addr+"/metrics")

	// Upstream's: csi-lib-utils' manager as upstream's main makes it, with what a connection through it
	// records: the start-up GetPluginInfo before the driver's name is known (the library's "unknown-driver"),
	// then a /healthz's Probe under the name.
	upstream := csimetrics.NewCSIMetricsManager("")
	upstream.RecordMetrics("/csi.v1.Identity/GetPluginInfo", nil, time.Millisecond)
	upstream.SetDriverName(driverName)
	upstream.RecordMetrics("/csi.v1.Identity/Probe", nil, time.Millisecond)
	want, err := metricsparity.Gather(upstream.GetRegistry())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := want["csi_sidecar_operations_seconds"]; !ok {
		t.Fatalf("csi-lib-utils' registry has no csi_sidecar_operations_seconds: %v", want)
	}
	metricsparity.Check(t, got, want, metricsparity.Options{
		Values: []string{"driver_name", "method_name", "grpc_status_code"},
		Extra: map[string]string{
			"go_*":       "the Go collector, which every other Stowage binary serves too",
			"process_*":  "the process collector (upstream's registry has only process_start_time_seconds of it)",
			"promhttp_*": "scrapes of /metrics, counted by the handler",
		},
	})
}

// TestE2ERegistrarServesNoMetrics: upstream's csi-node-driver-registrar serves /healthz (and pprof) at
// --http-endpoint and no metrics; Stowage's serves none either, so a scrape config that found none keeps
// finding none.
func TestE2ERegistrarServesNoMetrics(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	addr := rig.FreeAddr(t)
	dir := t.TempDir()
	start(t, ctx, "csi-node-driver-registrar", "--http-endpoint="+addr,
		"--kubelet-registration-path="+filepath.Join(dir, "csi.sock"), "--plugin-registration-path="+dir)
	rig.Eventually(t, ctx, time.Minute, "the registrar's HTTP endpoint answers", func(ctx context.Context) (bool, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/healthz", nil)
		if err != nil {
			return false, err
		}
		rsp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false, nil
		}
		rsp.Body.Close()
		return true, nil
	})
	if code, body := rig.Get(t, ctx, "http://"+addr+"/metrics"); code != http.StatusNotFound {
		t.Errorf("GET /metrics = %d, want 404 as upstream's: %s", code, body)
	}
}
