package ec2sim

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

func TestVolumeLifecycleThroughSDK(t *testing.T) {
	s := startServer(t, nil)
	c := newClient(t, s)
	ctx := ctxT(t)

	out, err := c.CreateVolume(ctx, &ec2.CreateVolumeInput{
		AvailabilityZone: aws.String(testZone), Size: aws.Int32(10), VolumeType: types.VolumeTypeGp3,
		TagSpecifications: []types.TagSpecification{{ResourceType: types.ResourceTypeVolume, Tags: []types.Tag{{Key: aws.String("CSIVolumeName"), Value: aws.String("pvc-1")}}}},
	})
	if err != nil {
		t.Fatalf("CreateVolume: %v", err)
	}
	if out.State != types.VolumeStateCreating || aws.ToInt32(out.Size) != 10 || aws.ToInt32(out.Iops) != 3000 || aws.ToInt32(out.Throughput) != 125 {
		t.Fatalf("CreateVolume answer: state %s size %d iops %d throughput %d", out.State, aws.ToInt32(out.Size), aws.ToInt32(out.Iops), aws.ToInt32(out.Throughput))
	}
	id := aws.ToString(out.VolumeId)
	v := waitVolumeState(t, c, id, types.VolumeStateAvailable)
	if len(v.Tags) != 1 || aws.ToString(v.Tags[0].Value) != "pvc-1" {
		t.Fatalf("tags %v", v.Tags)
	}

	att, err := c.AttachVolume(ctx, &ec2.AttachVolumeInput{Device: aws.String("/dev/xvdaa"), InstanceId: aws.String(testInstance), VolumeId: aws.String(id)})
	if err != nil {
		t.Fatalf("AttachVolume: %v", err)
	}
	if att.State != types.VolumeAttachmentStateAttaching || aws.ToString(att.Device) != "/dev/xvdaa" {
		t.Fatalf("attach answer %+v", att)
	}
	waitAttached(t, c, id, testInstance)
	if v := describeVolume(t, c, id); v.State != types.VolumeStateInUse {
		t.Fatalf("attached volume state %s", v.State)
	}
	inst, err := c.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{testInstance}})
	if err != nil {
		t.Fatalf("DescribeInstances: %v", err)
	}
	bdm := inst.Reservations[0].Instances[0].BlockDeviceMappings
	if len(bdm) != 1 || aws.ToString(bdm[0].DeviceName) != "/dev/xvdaa" || aws.ToString(bdm[0].Ebs.VolumeId) != id {
		t.Fatalf("block device mappings %+v", bdm)
	}
	_, err = c.DeleteVolume(ctx, &ec2.DeleteVolumeInput{VolumeId: aws.String(id)})
	wantCode(t, err, "VolumeInUse")

	if _, err := c.DetachVolume(ctx, &ec2.DetachVolumeInput{InstanceId: aws.String(testInstance), VolumeId: aws.String(id)}); err != nil {
		t.Fatalf("DetachVolume: %v", err)
	}
	waitVolumeState(t, c, id, types.VolumeStateAvailable)
	if _, err := c.DeleteVolume(ctx, &ec2.DeleteVolumeInput{VolumeId: aws.String(id)}); err != nil {
		t.Fatalf("DeleteVolume: %v", err)
	}
	_, err = c.DescribeVolumes(ctx, &ec2.DescribeVolumesInput{VolumeIds: []string{id}})
	wantCode(t, err, "InvalidVolume.NotFound")
	if st := s.State(); len(st.Volumes) != 0 || len(st.Attachments) != 0 {
		t.Fatalf("leftovers: %+v", st)
	}
}
