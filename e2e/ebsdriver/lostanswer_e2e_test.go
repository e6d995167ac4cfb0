//go:build e2e

package ebsdriver

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stowage-csi/stowage/e2e/ec2sim"
)

// TestE2EEBSLostAnswers loses EC2's answer to each mutating call once, after EC2 has carried it out (the
// connection closed or a 500, picked by the seeded fault), and drives the volume's whole life through
// ebs-plugin as a sidecar would, re-calling on a non-final error. Each step must end with exactly what one
// call would have made: one volume, one attachment, one snapshot; nothing left at the end.
func TestE2EEBSLostAnswers(t *testing.T) {
	const instanceID = "i-0105710575000a0e1"
	d := controllerDriver(t, instanceID)
	ctx := testContext(t, 5*time.Minute)
	lose := func(action string) {
		d.sim.SetFaults(ec2sim.Faults{Actions: []string{action}, LostAnswerRate: 1, Budget: 1, Seed: 20261124})
	}
	lost := func(action string) int {
		return d.sim.Requests(action, "LostAnswerDropped") + d.sim.Requests(action, "LostAnswerInternalError")
	}
	state := d.sim.State

	lose("CreateVolume")
	var volID string
	untilOK(ctx, t, "CreateVolume", func(ctx context.Context) error {
		v, err := d.ctl.CreateVolume(ctx, volumeRequest("pvc-lost-answers", 1, mountCapability("ext4"), map[string]string{"type": "gp3"}))
		volID = v.GetVolume().GetVolumeId()
		return err
	})
	if got := volumesNamed(state(), "pvc-lost-answers"); len(got) != 1 || got[0] != volID {
		t.Fatalf("after a lost CreateVolume answer EC2 holds volumes %v for the claim, want only %s", got, volID)
	}

	lose("AttachVolume")
	untilOK(ctx, t, "ControllerPublishVolume", func(ctx context.Context) error {
		_, err := d.ctl.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{VolumeId: volID, NodeId: instanceID, VolumeCapability: mountCapability("ext4")})
		return err
	})
	if atts := attachmentsOf(state(), volID); len(atts) != 1 || atts[0].State != "attached" || atts[0].InstanceID != instanceID {
		t.Fatalf("after a lost AttachVolume answer: attachments %+v, want one attached to %s", atts, instanceID)
	}

	lose("CreateSnapshot")
	var snapID string
	untilOK(ctx, t, "CreateSnapshot", func(ctx context.Context) error {
		s, err := d.ctl.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: "snapshot-lost-answers", SourceVolumeId: volID})
		snapID = s.GetSnapshot().GetSnapshotId()
		return err
	})
	if got := snapshotsNamed(state(), "snapshot-lost-answers"); len(got) != 1 || got[0] != snapID {
		t.Fatalf("after a lost CreateSnapshot answer EC2 holds snapshots %v for the name, want only %s", got, snapID)
	}

	lose("ModifyVolume")
	untilOK(ctx, t, "ControllerExpandVolume", func(ctx context.Context) error {
		_, err := d.ctl.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{VolumeId: volID, CapacityRange: &csi.CapacityRange{RequiredBytes: 2 << 30}})
		return err
	})
	if v := volumeState(state(), volID); v.SizeGiB != 2 {
		t.Fatalf("after a lost ModifyVolume answer volume %s is %d GiB, want 2", volID, v.SizeGiB)
	}

	lose("DetachVolume")
	untilOK(ctx, t, "ControllerUnpublishVolume", func(ctx context.Context) error {
		_, err := d.ctl.ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{VolumeId: volID, NodeId: instanceID})
		return err
	})
	if atts := attachmentsOf(state(), volID); len(atts) != 0 {
		t.Fatalf("after a lost DetachVolume answer: attachments %+v, want none", atts)
	}

	lose("DeleteSnapshot")
	untilOK(ctx, t, "DeleteSnapshot", func(ctx context.Context) error {
		_, err := d.ctl.DeleteSnapshot(ctx, &csi.DeleteSnapshotRequest{SnapshotId: snapID})
		return err
	})
	lose("DeleteVolume")
	untilOK(ctx, t, "DeleteVolume", func(ctx context.Context) error {
		_, err := d.ctl.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: volID})
		return err
	})
	if st := state(); len(st.Volumes)+len(st.Snapshots)+len(st.Attachments) != 0 {
		t.Fatalf("left in EC2: %+v", st)
	}
	for _, a := range []string{"CreateVolume", "AttachVolume", "CreateSnapshot", "ModifyVolume", "DetachVolume", "DeleteSnapshot", "DeleteVolume"} {
		if n := lost(a); n != 1 {
			t.Errorf("%s lost %d answers, want 1: the fault was not exercised", a, n)
		}
	}
}

// untilOK calls call until it succeeds, re-calling on the codes a sidecar treats as "maybe still running"
// (as external-attacher's and csi-snapshotter's isFinalError do), and fails the test on a final error.
func untilOK(ctx context.Context, t *testing.T, what string, call func(context.Context) error) {
	t.Helper()
	var last error
	for try := 0; try < 20; try++ {
		callCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := call(callCtx)
		cancel()
		if err == nil {
			return
		}
		last = err
		switch status.Code(err) {
		case codes.Canceled, codes.DeadlineExceeded, codes.Unavailable, codes.ResourceExhausted, codes.Aborted, codes.Unknown, codes.Internal:
		default:
			t.Fatalf("%s: final error %v", what, err)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: %v (last error %v)", what, ctx.Err(), last)
		case <-time.After(200 * time.Millisecond):
		}
	}
	t.Fatalf("%s: still failing after 20 calls: %v", what, last)
}

func volumesNamed(st ec2sim.StateDump, name string) []string {
	var out []string
	for _, v := range st.Volumes {
		if v.Tags["CSIVolumeName"] == name {
			out = append(out, v.ID)
		}
	}
	return out
}

func snapshotsNamed(st ec2sim.StateDump, name string) []string {
	var out []string
	for _, s := range st.Snapshots {
		if s.Tags["CSIVolumeSnapshotName"] == name {
			out = append(out, s.ID)
		}
	}
	return out
}

func attachmentsOf(st ec2sim.StateDump, volID string) []ec2sim.AttachmentState {
	var out []ec2sim.AttachmentState
	for _, a := range st.Attachments {
		if a.VolumeID == volID {
			out = append(out, a)
		}
	}
	return out
}

func volumeState(st ec2sim.StateDump, id string) ec2sim.VolumeState {
	for _, v := range st.Volumes {
		if v.ID == id {
			return v
		}
	}
	return ec2sim.VolumeState{ID: fmt.Sprintf("%s (not in EC2)", id)}
}
