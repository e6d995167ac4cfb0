package ec2sim

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/stowage-csi/stowage/e2e/rig"
)

// findModification describes the volume's latest modification.
func findModification(ctx context.Context, c *ec2.Client, id string) (types.VolumeModification, error) {
	out, err := c.DescribeVolumesModifications(ctx, &ec2.DescribeVolumesModificationsInput{VolumeIds: []string{id}})
	if err != nil {
		return types.VolumeModification{}, fmt.Errorf("DescribeVolumesModifications %s: %w", id, err)
	}
	if len(out.VolumesModifications) == 0 {
		return types.VolumeModification{}, fmt.Errorf("%s has no modifications", id)
	}
	return out.VolumesModifications[len(out.VolumesModifications)-1], nil
}

func latestModification(t *testing.T, c *ec2.Client, id string) types.VolumeModification {
	t.Helper()
	m, err := findModification(ctxT(t), c, id)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// waitModification waits until the volume's latest modification is in one of states.
func waitModification(t *testing.T, c *ec2.Client, id string, states ...types.VolumeModificationState) {
	t.Helper()
	rig.Eventually(t, ctxT(t), waitTimeout, fmt.Sprintf("%s modification in %v", id, states), func(ctx context.Context) (bool, error) {
		m, err := findModification(ctx, c, id)
		return err == nil && slices.Contains(states, m.ModificationState), err
	})
}

func TestModifyVolumeStateMachine(t *testing.T) {
	s := startServer(t, func(c *Config) { c.TimeScale = 0.02 })
	c := newClient(t, s)
	ctx := ctxT(t)
	id := createVolume(t, c, &ec2.CreateVolumeInput{Size: aws.Int32(1), VolumeType: "gp3"})
	_, err := c.DescribeVolumesModifications(ctx, &ec2.DescribeVolumesModificationsInput{VolumeIds: []string{id}})
	wantCode(t, err, "InvalidVolumeModification.NotFound")

	out, err := c.ModifyVolume(ctx, &ec2.ModifyVolumeInput{VolumeId: aws.String(id), Size: aws.Int32(8), Iops: aws.Int32(4000), Throughput: aws.Int32(250)})
	if err != nil {
		t.Fatal(err)
	}
	m := out.VolumeModification
	if m.ModificationState != types.VolumeModificationStateModifying || aws.ToInt32(m.TargetSize) != 8 || aws.ToInt32(m.OriginalSize) != 1 ||
		aws.ToInt32(m.TargetIops) != 4000 || aws.ToInt32(m.OriginalIops) != 3000 || aws.ToInt32(m.TargetThroughput) != 250 || m.TargetVolumeType != "gp3" {
		t.Errorf("modification %+v", m)
	}
	// By optimizing, the new configuration is the volume's and its file has grown.
	// At this time scale optimizing lasts 0.2 s, so a poll may see it completed already.
	waitModification(t, c, id, types.VolumeModificationStateOptimizing, types.VolumeModificationStateCompleted)
	v := describeVolume(t, c, id)
	if aws.ToInt32(v.Size) != 8 || aws.ToInt32(v.Iops) != 4000 || aws.ToInt32(v.Throughput) != 250 {
		t.Errorf("after modifying: size %d iops %d throughput %d", aws.ToInt32(v.Size), aws.ToInt32(v.Iops), aws.ToInt32(v.Throughput))
	}
	fi, err := os.Stat(s.State().Volumes[0].File)
	if err != nil || fi.Size() != 8<<30 {
		t.Errorf("volume file: %v %v", fi, err)
	}
	waitModification(t, c, id, types.VolumeModificationStateCompleted)
	if m := latestModification(t, c, id); aws.ToInt64(m.Progress) != 100 || m.EndTime == nil {
		t.Errorf("completed modification %+v", m)
	}

	// Type change gp3 -> io2 needs IOPS; shrinking is refused; a no-op is refused.
	_, err = c.ModifyVolume(ctx, &ec2.ModifyVolumeInput{VolumeId: aws.String(id), Size: aws.Int32(1)})
	if msg := wantCode(t, err, "InvalidParameterValue"); !strings.Contains(msg, "smaller") {
		t.Errorf("shrink: %q", msg)
	}
	_, err = c.ModifyVolume(ctx, &ec2.ModifyVolumeInput{VolumeId: aws.String(id), Size: aws.Int32(8)})
	wantCode(t, err, "InvalidParameterCombination")
	_, err = c.ModifyVolume(ctx, &ec2.ModifyVolumeInput{VolumeId: aws.String(id), VolumeType: "io2"})
	wantCode(t, err, "MissingParameter")
	_, err = c.ModifyVolume(ctx, &ec2.ModifyVolumeInput{VolumeId: aws.String(id), Iops: aws.Int32(1 << 30)})
	if msg := wantCode(t, err, "InvalidParameterValue"); !strings.Contains(msg, "maximum is 80000") {
		t.Errorf("iops too high: %q", msg)
	}
	_, err = c.ModifyVolume(ctx, &ec2.ModifyVolumeInput{VolumeId: aws.String(id), VolumeType: "io2", Iops: aws.Int32(2000), DryRun: aws.Bool(true)})
	wantCode(t, err, "DryRunOperation")
	if _, err := c.ModifyVolume(ctx, &ec2.ModifyVolumeInput{VolumeId: aws.String(id), VolumeType: "io2", Iops: aws.Int32(2000)}); err != nil {
		t.Fatal(err)
	}
	waitVolume(t, c, id, "io2", func(v types.Volume) bool { return v.VolumeType == types.VolumeTypeIo2 })
	if v := describeVolume(t, c, id); aws.ToInt32(v.Iops) != 2000 || v.Throughput != nil {
		t.Errorf("io2: iops %d throughput %v", aws.ToInt32(v.Iops), v.Throughput)
	}
	_, err = c.ModifyVolume(ctx, &ec2.ModifyVolumeInput{VolumeId: aws.String("vol-00000000000000001"), Size: aws.Int32(5)})
	wantCode(t, err, "InvalidVolume.NotFound")

	out2, err := c.DescribeVolumesModifications(ctx, &ec2.DescribeVolumesModificationsInput{
		Filters: []types.Filter{{Name: aws.String("modification-state"), Values: []string{"modifying", "optimizing", "completed"}}}})
	if err != nil || len(out2.VolumesModifications) != 1 {
		t.Errorf("filtered modifications: %+v %v", out2, err)
	}
}

func TestModifyVolumeCooldown(t *testing.T) {
	s := startServer(t, func(c *Config) { c.ModifyCooldown = time.Hour })
	c := newClient(t, s)
	ctx := ctxT(t)
	id := createVolume(t, c, &ec2.CreateVolumeInput{Size: aws.Int32(1), VolumeType: "gp3"})
	if _, err := c.ModifyVolume(ctx, &ec2.ModifyVolumeInput{VolumeId: aws.String(id), Size: aws.Int32(2)}); err != nil {
		t.Fatal(err)
	}
	waitModification(t, c, id, types.VolumeModificationStateCompleted)
	_, err := c.ModifyVolume(ctx, &ec2.ModifyVolumeInput{VolumeId: aws.String(id), Size: aws.Int32(3)})
	if msg := wantCode(t, err, "VolumeModificationRateExceeded"); !strings.Contains(msg, "Wait at least") {
		t.Errorf("cooldown: %q", msg)
	}
}
