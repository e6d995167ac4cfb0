package ec2sim

import (
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// These tests run at EC2's real delays on a fake clock, so each intermediate state is seen for certain.

func TestVolumeAndAttachmentTransitions(t *testing.T) {
	s, clk := startFake(t, nil)
	c := newClient(t, s)
	ctx := ctxT(t)
	out, err := c.CreateVolume(ctx, &ec2.CreateVolumeInput{AvailabilityZone: aws.String(testZone), Size: aws.Int32(1)})
	if err != nil {
		t.Fatal(err)
	}
	vol := aws.ToString(out.VolumeId)
	// Visible at once, in state creating, for at least a second; never NotFound.
	if v := describeVolume(t, c, vol); v.State != types.VolumeStateCreating {
		t.Fatalf("new volume %s", v.State)
	}
	clk.Advance(999 * time.Millisecond)
	if v := describeVolume(t, c, vol); v.State != types.VolumeStateCreating {
		t.Fatalf("volume after 0.999 s: %s", v.State)
	}
	wantCode(t, attach(c, t, vol, testInstance, "/dev/xvdaa"), "IncorrectState")
	clk.Advance(2001 * time.Millisecond)
	if v := describeVolume(t, c, vol); v.State != types.VolumeStateAvailable {
		t.Fatalf("volume after 3 s: %s", v.State)
	}

	if err := attach(c, t, vol, testInstance, "/dev/xvdaa"); err != nil {
		t.Fatal(err)
	}
	if st := attachmentState(t, c, vol, testInstance); st != types.VolumeAttachmentStateAttaching {
		t.Fatalf("new attachment %s", st)
	}
	if v := describeVolume(t, c, vol); v.State != types.VolumeStateInUse {
		t.Errorf("volume while attaching: %s", v.State)
	}
	inst, err := c.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{testInstance}})
	if err != nil {
		t.Fatal(err)
	}
	if bdm := inst.Reservations[0].Instances[0].BlockDeviceMappings; len(bdm) != 1 || bdm[0].Ebs.Status != types.AttachmentStatusAttaching {
		t.Errorf("mappings while attaching: %+v", bdm)
	}
	clk.Advance(1999 * time.Millisecond)
	if st := attachmentState(t, c, vol, testInstance); st != types.VolumeAttachmentStateAttaching {
		t.Fatalf("attachment after 1.999 s: %s", st)
	}
	clk.Advance(2 * time.Second)
	if st := attachmentState(t, c, vol, testInstance); st != types.VolumeAttachmentStateAttached {
		t.Fatalf("attachment after 4 s: %s", st)
	}

	det, err := c.DetachVolume(ctx, &ec2.DetachVolumeInput{VolumeId: aws.String(vol), InstanceId: aws.String(testInstance)})
	if err != nil || det.State != types.VolumeAttachmentStateDetaching {
		t.Fatalf("detach: %+v %v", det, err)
	}
	// Detaching again while detaching answers the same attachment.
	if det, err := c.DetachVolume(ctx, &ec2.DetachVolumeInput{VolumeId: aws.String(vol)}); err != nil || det.State != types.VolumeAttachmentStateDetaching {
		t.Errorf("second detach: %+v %v", det, err)
	}
	if st := attachmentState(t, c, vol, testInstance); st != types.VolumeAttachmentStateDetaching {
		t.Errorf("attachment while detaching: %s", st)
	}
	clk.Advance(3 * time.Second)
	if v := describeVolume(t, c, vol); v.State != types.VolumeStateAvailable || len(v.Attachments) != 0 {
		t.Errorf("after detach: %s %+v", v.State, v.Attachments)
	}
}

func TestModificationTransitions(t *testing.T) {
	s, clk := startFake(t, nil)
	c := newClient(t, s)
	ctx := ctxT(t)
	out, err := c.CreateVolume(ctx, &ec2.CreateVolumeInput{AvailabilityZone: aws.String(testZone), Size: aws.Int32(100), VolumeType: "gp3"})
	if err != nil {
		t.Fatal(err)
	}
	vol := aws.ToString(out.VolumeId)
	_, err = c.ModifyVolume(ctx, &ec2.ModifyVolumeInput{VolumeId: out.VolumeId, Size: aws.Int32(200)})
	wantCode(t, err, "IncorrectState")
	clk.Advance(3 * time.Second)

	if _, err := c.ModifyVolume(ctx, &ec2.ModifyVolumeInput{VolumeId: out.VolumeId, Size: aws.Int32(200), VolumeType: "io2", Iops: aws.Int32(5000)}); err != nil {
		t.Fatal(err)
	}
	m := latestModification(t, c, vol)
	if m.ModificationState != types.VolumeModificationStateModifying || aws.ToInt64(m.Progress) != 0 {
		t.Fatalf("new modification %+v", m)
	}
	// While modifying, the volume keeps its configuration and refuses another modification.
	if v := describeVolume(t, c, vol); aws.ToInt32(v.Size) != 100 || v.VolumeType != types.VolumeTypeGp3 {
		t.Errorf("volume while modifying: %d %s", aws.ToInt32(v.Size), v.VolumeType)
	}
	_, err = c.ModifyVolume(ctx, &ec2.ModifyVolumeInput{VolumeId: out.VolumeId, Size: aws.Int32(300)})
	wantCode(t, err, "IncorrectModificationState")

	clk.Advance(3 * time.Second)
	m = latestModification(t, c, vol)
	if m.ModificationState != types.VolumeModificationStateOptimizing {
		t.Fatalf("after 3 s: %s", m.ModificationState)
	}
	if p := aws.ToInt64(m.Progress); p <= 0 || p >= 100 {
		t.Errorf("optimizing progress %d", p)
	}
	v := describeVolume(t, c, vol)
	if aws.ToInt32(v.Size) != 200 || v.VolumeType != types.VolumeTypeIo2 || aws.ToInt32(v.Iops) != 5000 || v.Throughput != nil {
		t.Errorf("volume while optimizing: size %d type %s iops %d throughput %v", aws.ToInt32(v.Size), v.VolumeType, aws.ToInt32(v.Iops), v.Throughput)
	}
	_, err = c.ModifyVolume(ctx, &ec2.ModifyVolumeInput{VolumeId: out.VolumeId, Size: aws.Int32(300)})
	wantCode(t, err, "IncorrectModificationState")
	// optimizing lasts 10 s + 20 ms per GiB.
	clk.Advance(10*time.Second + 200*20*time.Millisecond)
	m = latestModification(t, c, vol)
	if m.ModificationState != types.VolumeModificationStateCompleted || aws.ToInt64(m.Progress) != 100 || m.EndTime == nil || m.StartTime == nil {
		t.Errorf("completed modification %+v", m)
	}
	if _, err := c.ModifyVolume(ctx, &ec2.ModifyVolumeInput{VolumeId: out.VolumeId, Size: aws.Int32(300)}); err != nil {
		t.Errorf("modify after completion: %v", err)
	}
}

func TestSnapshotTransitionsAndInitialization(t *testing.T) {
	s, clk := startFake(t, nil)
	c := newClient(t, s)
	ctx := ctxT(t)
	out, err := c.CreateVolume(ctx, &ec2.CreateVolumeInput{AvailabilityZone: aws.String(testZone), Size: aws.Int32(10)})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.CreateSnapshot(ctx, &ec2.CreateSnapshotInput{VolumeId: out.VolumeId})
	wantCode(t, err, "IncorrectState")
	clk.Advance(3 * time.Second)
	snap, err := c.CreateSnapshot(ctx, &ec2.CreateSnapshotInput{VolumeId: out.VolumeId})
	if err != nil {
		t.Fatal(err)
	}
	describe := func() types.Snapshot {
		out, err := c.DescribeSnapshots(ctx, &ec2.DescribeSnapshotsInput{SnapshotIds: []string{aws.ToString(snap.SnapshotId)}})
		if err != nil {
			t.Fatal(err)
		}
		return out.Snapshots[0]
	}
	if sn := describe(); sn.State != types.SnapshotStatePending || aws.ToString(sn.Progress) != "0%" {
		t.Fatalf("new snapshot %s %s", sn.State, aws.ToString(sn.Progress))
	}
	_, err = c.CreateVolume(ctx, &ec2.CreateVolumeInput{AvailabilityZone: aws.String(testZone), SnapshotId: snap.SnapshotId})
	if msg := wantCode(t, err, "IncorrectState"); !strings.Contains(msg, "pending") {
		t.Errorf("restore from a pending snapshot: %q", msg)
	}
	// 3 s + 100 ms per GiB: 4 s for 10 GiB.
	clk.Advance(2 * time.Second)
	if sn := describe(); sn.State != types.SnapshotStatePending || aws.ToString(sn.Progress) != "50%" {
		t.Errorf("half-way snapshot %s %s", sn.State, aws.ToString(sn.Progress))
	}
	clk.Advance(2 * time.Second)
	if sn := describe(); sn.State != types.SnapshotStateCompleted || aws.ToString(sn.Progress) != "100%" {
		t.Fatalf("completed snapshot %s %s", sn.State, aws.ToString(sn.Progress))
	}

	restored, err := c.CreateVolume(ctx, &ec2.CreateVolumeInput{AvailabilityZone: aws.String(testZone), SnapshotId: snap.SnapshotId})
	if err != nil {
		t.Fatal(err)
	}
	if aws.ToInt32(restored.Size) != 10 {
		t.Errorf("restored size %d", aws.ToInt32(restored.Size))
	}
	initState := func(id string) (string, *types.InitializationStatusDetails) {
		t.Helper()
		out, err := c.DescribeVolumeStatus(ctx, &ec2.DescribeVolumeStatusInput{VolumeIds: []string{id}})
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range out.VolumeStatuses[0].VolumeStatus.Details {
			if d.Name == types.VolumeStatusNameInitializationState {
				return aws.ToString(d.Status), out.VolumeStatuses[0].InitializationStatusDetails
			}
		}
		t.Fatalf("no initialization-state in %+v", out.VolumeStatuses[0])
		return "", nil
	}
	clk.Advance(3 * time.Second)
	// Initialization: 5 s + 50 ms per GiB after the volume is ready.
	st, details := initState(aws.ToString(restored.VolumeId))
	if st != "initializing" || details == nil || aws.ToInt64(details.EstimatedTimeToCompleteInSeconds) <= 0 {
		t.Errorf("restored volume: %s %+v", st, details)
	}
	clk.Advance(6 * time.Second)
	if st, details := initState(aws.ToString(restored.VolumeId)); st != "completed" || aws.ToInt64(details.Progress) != 100 {
		t.Errorf("after initialization: %s %+v", st, details)
	}
	if st, details := initState(aws.ToString(out.VolumeId)); st != "completed" || details != nil {
		t.Errorf("blank volume: %s %+v", st, details)
	}
	_, err = c.DescribeVolumeStatus(ctx, &ec2.DescribeVolumeStatusInput{VolumeIds: []string{"vol-00000000000000009"}})
	wantCode(t, err, "InvalidVolume.NotFound")
}
