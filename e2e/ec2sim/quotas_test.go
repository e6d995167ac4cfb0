package ec2sim

import (
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

func TestQuotasRefuseStorageAndSnapshotsBeyondThem(t *testing.T) {
	s := startServer(t, func(c *Config) { c.Quotas = Quotas{StorageGiB: map[string]int64{"gp3": 1024}, Snapshots: 1} })
	c := newClient(t, s)
	ctx := ctxT(t)
	create := func(size int32, typ types.VolumeType, token string) (*ec2.CreateVolumeOutput, error) {
		return c.CreateVolume(ctx, &ec2.CreateVolumeInput{AvailabilityZone: aws.String(testZone), Size: aws.Int32(size), VolumeType: typ, ClientToken: aws.String(token)})
	}
	first, err := create(1000, "gp3", "a")
	if err != nil {
		t.Fatal(err)
	}
	_, err = create(25, "gp3", "b")
	if msg := wantCode(t, err, "VolumeLimitExceeded"); !strings.Contains(msg, "maximum gp3 storage limit of 1 TiB") {
		t.Errorf("message %q", msg)
	}
	// The same token still answers the volume it made, and other types have their own quota.
	if again, err := create(1000, "gp3", "a"); err != nil || aws.ToString(again.VolumeId) != aws.ToString(first.VolumeId) {
		t.Errorf("repeat of the first request = %v, %v", again, err)
	}
	if _, err := create(25, "gp2", "c"); err != nil {
		t.Errorf("gp2 has no quota set: %v", err)
	}
	waitVolumeState(t, c, aws.ToString(first.VolumeId), types.VolumeStateAvailable)
	if _, err := c.CopyVolumes(ctx, &ec2.CopyVolumesInput{SourceVolumeId: first.VolumeId}); err == nil {
		t.Error("a copy beyond the quota was made")
	} else {
		wantCode(t, err, "VolumeLimitExceeded")
	}

	if _, err := c.CreateSnapshot(ctx, &ec2.CreateSnapshotInput{VolumeId: first.VolumeId}); err != nil {
		t.Fatal(err)
	}
	_, err = c.CreateSnapshot(ctx, &ec2.CreateSnapshotInput{VolumeId: first.VolumeId})
	wantCode(t, err, "SnapshotLimitExceeded")

	// Raising the quota at run time lets the next request through.
	s.SetQuotas(Quotas{StorageGiB: map[string]int64{"gp3": 2048}})
	if _, err := create(25, "gp3", "b"); err != nil {
		t.Errorf("after raising the quota: %v", err)
	}
}
