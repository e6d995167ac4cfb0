//go:build e2e || bench

package attacher

import (
	"os"
	"testing"
	"time"

	e2erig "github.com/stowage-csi/stowage/e2e/rig"
	"github.com/stowage-csi/stowage/e2e/sidecarrig"
)

const (
	// attacherUser is who csi-attacher writes as.
	attacherUser = "system:serviceaccount:" + sidecarrig.Namespace + ":csi-attacher"
	// waitTimeout bounds each wait for a controller or the attacher: they act in seconds, the margin is for
	// a machine busy with other builds.
	waitTimeout = 2 * time.Minute
)

func TestMain(m *testing.M) { os.Exit(sidecarrig.Main(m, sidecarrig.Attacher())) }

// rig is the sidecar rig with csi-attacher's RBAC and an audit log of the writes to VolumeAttachments and
// PersistentVolumes.
type rig struct {
	*sidecarrig.Rig
	binary string // Stowage's csi-attacher
}

func startRig(t *testing.T) *rig {
	t.Helper()
	return &rig{Rig: sidecarrig.Start(t, rigOptions()), binary: sidecarrig.Binary(t, sidecarrig.Attacher())}
}

func rigOptions() sidecarrig.Options {
	return sidecarrig.Options{Sidecars: []sidecarrig.Sidecar{sidecarrig.Attacher()},
		Audit: []string{"storage.k8s.io/volumeattachments", "/persistentvolumes"}}
}

// startAttacher runs Stowage's csi-attacher against endpoint as startBinary does.
func (r *rig) startAttacher(t *testing.T, name, endpoint string, args ...string) *e2erig.Process {
	t.Helper()
	return r.startBinary(t, r.binary, name, endpoint, args...)
}

// startBinary runs the csi-attacher at path (Stowage's or upstream's) against endpoint with leader election,
// until t ends.
func (r *rig) startBinary(t *testing.T, path, name, endpoint string, args ...string) *e2erig.Process {
	t.Helper()
	return r.Start(t, sidecarrig.Attacher(), sidecarrig.Run{Name: name, Path: path, Endpoint: endpoint,
		Args: append([]string{"--leader-election", "-v=2"}, args...)})
}

// attacherWrites returns csi-attacher's writes in the audit log, in order, as
// "verb resource[/subresource] name code user".
func (r *rig) attacherWrites(t *testing.T) []string {
	t.Helper()
	return e2erig.Strings(r.Writes(t, sidecarrig.Attacher()))
}

// since returns the entries of now that were not in before (the log only grows).
func since(before, now []string) []string { return now[len(before):] }
