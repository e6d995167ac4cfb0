//go:build e2e || bench

package resizer

import (
	"os"
	"testing"
	"time"

	e2erig "github.com/stowage-csi/stowage/e2e/rig"
	"github.com/stowage-csi/stowage/e2e/sidecarrig"
)

// waitTimeout bounds each wait for a controller or the resizer: they act in seconds, the margin is for a
// machine busy with other builds.
const waitTimeout = 2 * time.Minute

// upstreamArgs are exactly the csi-resizer args of aws-ebs-csi-driver's manifest, without --csi-address
// (the socket differs here; the rig adds it).
var upstreamArgs = []string{"--timeout=60s", "--extra-modify-metadata", "--v=2", "--handle-volume-inuse-error=false",
	"--leader-election=true", "--kube-api-qps=20", "--kube-api-burst=100", "--workers=100", "--retry-interval-max=30m"}

func TestMain(m *testing.M) { os.Exit(sidecarrig.Main(m, sidecarrig.Resizer())) }

// rig is the sidecar rig with csi-resizer's RBAC and an audit log of the writes to claims and volumes.
type rig struct{ *sidecarrig.Rig }

func startRig(t *testing.T) rig {
	t.Helper()
	return rig{sidecarrig.Start(t, sidecarrig.Options{Sidecars: []sidecarrig.Sidecar{sidecarrig.Resizer()},
		Audit: []string{"/persistentvolumeclaims", "/persistentvolumes"}})}
}

// startResizer runs Stowage's csi-resizer against endpoint until t ends.
func (r rig) startResizer(t *testing.T, name, endpoint string, args ...string) *e2erig.Process {
	t.Helper()
	return r.Start(t, sidecarrig.Resizer(), sidecarrig.Run{Name: name, Endpoint: endpoint, Args: args})
}

// resizerWrites returns the audit log's writes by the resizer, in order.
func (r rig) resizerWrites(t *testing.T) []e2erig.AuditWrite {
	t.Helper()
	return r.Writes(t, sidecarrig.Resizer())
}
