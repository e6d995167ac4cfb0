//go:build e2e

package ebsdriver

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"

	"github.com/stowage-csi/stowage/e2e/ec2sim"
	"github.com/stowage-csi/stowage/e2e/rig"
)

// driver is one ebs-plugin under test, with its emulator and the one instance it publishes volumes to. Its
// methods fail the test on an error and register cleanups that undo what they did (delete, detach,
// unmount), so a test that fails half-way leaves nothing behind.
type driver struct {
	t          *testing.T
	sim        *ec2sim.Server
	p          *plugin
	instanceID string
	ctl        csi.ControllerClient
	node       csi.NodeClient
	work       string
}

// localDriver runs ebs-plugin in all mode on one local instance: publishing makes a real loop device, and
// staging really formats and mounts it.
func localDriver(t *testing.T, instanceID string, extra ...string) *driver {
	t.Helper()
	sim, p := startLocalPlugin(t, instanceID, extra...)
	return newDriver(t, sim, p, instanceID)
}

// controllerDriver runs ebs-plugin's controller service on one (not local) instance.
func controllerDriver(t *testing.T, instanceID string) *driver {
	t.Helper()
	sim, p := startController(t, instanceID)
	return newDriver(t, sim, p, instanceID)
}

func newDriver(t *testing.T, sim *ec2sim.Server, p *plugin, instanceID string) *driver {
	return &driver{t: t, sim: sim, p: p, instanceID: instanceID, ctl: csi.NewControllerClient(p.conn), node: csi.NewNodeClient(p.conn), work: t.TempDir()}
}

// mountCapability is a single-node-writer file system of fsType ("" for the driver's default).
func mountCapability(fsType string) *csi.VolumeCapability {
	return &csi.VolumeCapability{
		AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{FsType: fsType}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
	}
}

// blockCapability is a single-node-writer raw block volume.
func blockCapability() *csi.VolumeCapability {
	return &csi.VolumeCapability{AccessType: &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER}}
}

// volumeRequest is a CreateVolume of gib GiB with capability and the StorageClass parameters params.
func volumeRequest(name string, gib int64, capability *csi.VolumeCapability, params map[string]string) *csi.CreateVolumeRequest {
	return &csi.CreateVolumeRequest{Name: name, CapacityRange: &csi.CapacityRange{RequiredBytes: gib << 30},
		VolumeCapabilities: []*csi.VolumeCapability{capability}, Parameters: params}
}

// createVolume creates the volume and returns its ID; it is deleted when the test ends.
func (d *driver) createVolume(ctx context.Context, req *csi.CreateVolumeRequest) string {
	d.t.Helper()
	vol, err := d.ctl.CreateVolume(ctx, req)
	if err != nil {
		d.t.Fatalf("CreateVolume %s: %v", req.GetName(), err)
	}
	id := vol.GetVolume().GetVolumeId()
	d.t.Cleanup(func() { _, _ = d.ctl.DeleteVolume(context.Background(), &csi.DeleteVolumeRequest{VolumeId: id}) })
	return id
}

// attach publishes the volume to the driver's instance and returns the publish context; it is detached when
// the test ends.
func (d *driver) attach(ctx context.Context, id string, capability *csi.VolumeCapability) map[string]string {
	d.t.Helper()
	pub, err := d.ctl.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{VolumeId: id, NodeId: d.instanceID, VolumeCapability: capability})
	if err != nil {
		d.t.Fatalf("ControllerPublishVolume %s: %v", id, err)
	}
	d.t.Cleanup(func() {
		_, _ = d.ctl.ControllerUnpublishVolume(context.Background(), &csi.ControllerUnpublishVolumeRequest{VolumeId: id, NodeId: d.instanceID})
	})
	return pub.GetPublishContext()
}

// detach unpublishes the volume from the driver's instance.
func (d *driver) detach(ctx context.Context, id string) {
	d.t.Helper()
	if _, err := d.ctl.ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{VolumeId: id, NodeId: d.instanceID}); err != nil {
		d.t.Fatalf("ControllerUnpublishVolume %s: %v", id, err)
	}
}

// deleteVolume deletes the volume.
func (d *driver) deleteVolume(ctx context.Context, id string) {
	d.t.Helper()
	if _, err := d.ctl.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: id}); err != nil {
		d.t.Fatalf("DeleteVolume %s: %v", id, err)
	}
}

// nodeVolume is a volume attached, staged and published on the driver's instance.
type nodeVolume struct {
	id, staging, target string
}

// mount attaches the volume, stages it (with volumeContext) and publishes it under the test's directory, in
// a directory of its own named name; mounts left at the end of the test are detached before the volume is.
func (d *driver) mount(ctx context.Context, name, id string, capability *csi.VolumeCapability, volumeContext map[string]string) *nodeVolume {
	d.t.Helper()
	publishContext := d.attach(ctx, id, capability)
	v := &nodeVolume{id: id, staging: filepath.Join(d.work, name, "staging"), target: filepath.Join(d.work, name, "pod", "target")}
	d.t.Cleanup(func() {
		_ = unix.Unmount(v.target, unix.MNT_DETACH)
		_ = unix.Unmount(v.staging, unix.MNT_DETACH)
	})
	if _, err := d.node.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: id, StagingTargetPath: v.staging, VolumeCapability: capability,
		PublishContext: publishContext, VolumeContext: volumeContext}); err != nil {
		d.t.Fatalf("NodeStageVolume %s: %v", id, err)
	}
	if _, err := d.node.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: id, StagingTargetPath: v.staging, TargetPath: v.target,
		VolumeCapability: capability, PublishContext: publishContext}); err != nil {
		d.t.Fatalf("NodePublishVolume %s: %v", id, err)
	}
	return v
}

// unpublish calls NodeUnpublishVolume.
func (d *driver) unpublish(ctx context.Context, v *nodeVolume) {
	d.t.Helper()
	if _, err := d.node.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: v.id, TargetPath: v.target}); err != nil {
		d.t.Fatalf("NodeUnpublishVolume %s: %v", v.id, err)
	}
}

// unstage calls NodeUnstageVolume.
func (d *driver) unstage(ctx context.Context, v *nodeVolume) {
	d.t.Helper()
	if _, err := d.node.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: v.id, StagingTargetPath: v.staging}); err != nil {
		d.t.Fatalf("NodeUnstageVolume %s: %v", v.id, err)
	}
}

// unmount undoes mount: unpublish, unstage, detach.
func (d *driver) unmount(ctx context.Context, v *nodeVolume) {
	d.t.Helper()
	d.unpublish(ctx, v)
	d.unstage(ctx, v)
	d.detach(ctx, v.id)
}

// attachmentState is the state of the volume's attachment in EC2, "" when it has none.
func (d *driver) attachmentState(volumeID string) string {
	for _, a := range d.sim.State().Attachments {
		if a.VolumeID == volumeID {
			return a.State
		}
	}
	return ""
}

// loopDevice is the loop device EC2 attached the volume as, "" when it has none.
func (d *driver) loopDevice(volumeID string) string {
	for _, a := range d.sim.State().Attachments {
		if a.VolumeID == volumeID {
			return a.LoopDevice
		}
	}
	return ""
}

// snapshotReady snapshots the volume, waits until the snapshot is ready, and returns its ID; it is deleted
// when the test ends.
func (d *driver) snapshotReady(ctx context.Context, name, volumeID string) string {
	d.t.Helper()
	snap, err := d.ctl.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: name, SourceVolumeId: volumeID})
	if err != nil {
		d.t.Fatalf("CreateSnapshot %s of %s: %v", name, volumeID, err)
	}
	id := snap.GetSnapshot().GetSnapshotId()
	d.t.Cleanup(func() { _, _ = d.ctl.DeleteSnapshot(context.Background(), &csi.DeleteSnapshotRequest{SnapshotId: id}) })
	rig.Eventually(d.t, ctx, time.Minute, "snapshot "+id+" ready", func(ctx context.Context) (bool, error) {
		list, err := d.ctl.ListSnapshots(ctx, &csi.ListSnapshotsRequest{SnapshotId: id})
		if err != nil || len(list.GetEntries()) != 1 {
			return false, fmt.Errorf("ListSnapshots %s: %v %v", id, list, err)
		}
		return list.GetEntries()[0].GetSnapshot().GetReadyToUse(), nil
	})
	return id
}

// testContext is the context of one test's CSI calls: cancelled when the test ends, and after timeout at the
// latest, so that a hung driver fails its test instead of the package's whole run.
func testContext(t *testing.T, timeout time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	return ctx
}
