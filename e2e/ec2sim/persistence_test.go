package ec2sim

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

func TestPersistenceAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{DataDir: dir, TimeScale: 0.01, Instances: []Instance{{ID: testInstance, Zone: testZone, Type: "m5.large"}}}
	s1 := startConfig(t, cfg)
	c := newClient(t, s1)
	ctx := ctxT(t)
	vol := createVolume(t, c, &ec2.CreateVolumeInput{Size: aws.Int32(1), ClientToken: aws.String("persist-1"),
		TagSpecifications: []types.TagSpecification{{ResourceType: types.ResourceTypeVolume, Tags: []types.Tag{{Key: aws.String("CSIVolumeName"), Value: aws.String("pvc-p")}}}}})
	if err := attach(c, t, vol, testInstance, "/dev/xvdaa"); err != nil {
		t.Fatal(err)
	}
	waitAttached(t, c, vol, testInstance)
	snap := createSnapshot(t, c, vol)
	if _, err := c.ModifyVolume(ctx, &ec2.ModifyVolumeInput{VolumeId: aws.String(vol), Size: aws.Int32(2)}); err != nil {
		t.Fatal(err)
	}
	before := s1.State()
	if err := s1.Close(); err != nil {
		t.Fatal(err)
	}

	s2 := startConfig(t, cfg)
	c2 := newClient(t, s2)
	after := s2.State()
	if len(after.Volumes) != 1 || len(after.Attachments) != 1 || len(after.Snapshots) != 1 || after.Attachments[0].Device != "/dev/xvdaa" {
		t.Fatalf("state after restart %+v (before %+v)", after, before)
	}
	v := describeVolume(t, c2, vol)
	if v.State != types.VolumeStateInUse || len(v.Tags) != 1 {
		t.Errorf("volume after restart %+v", v)
	}
	// The modification goes on where it was, and the token still points at the volume.
	waitModification(t, c2, vol, types.VolumeModificationStateCompleted)
	if aws.ToInt32(describeVolume(t, c2, vol).Size) != 2 {
		t.Error("modification lost across restart")
	}
	waitSnapshot(t, c2, snap)
	out, err := c2.CreateVolume(ctx, &ec2.CreateVolumeInput{AvailabilityZone: aws.String(testZone), Size: aws.Int32(1), ClientToken: aws.String("persist-1"),
		TagSpecifications: []types.TagSpecification{{ResourceType: types.ResourceTypeVolume, Tags: []types.Tag{{Key: aws.String("CSIVolumeName"), Value: aws.String("pvc-p")}}}}})
	if err != nil || aws.ToString(out.VolumeId) != vol {
		t.Errorf("ClientToken after restart: %v %v", out, err)
	}
}

func TestRestartRemovesOrphanedFiles(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{DataDir: dir, TimeScale: 0.01}
	s := startConfig(t, cfg)
	c := newClient(t, s)
	vol := createVolume(t, c, &ec2.CreateVolumeInput{Size: aws.Int32(1)})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	orphans := []string{
		filepath.Join(dir, "volumes", "vol-00000000000000001.img"),
		filepath.Join(dir, "volumes", "vol-00000000000000002.img.tmp"),
		filepath.Join(dir, "snapshots", "snap-00000000000000001.img"),
	}
	for _, p := range orphans {
		if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	s2 := startConfig(t, cfg)
	for _, p := range orphans {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s survived the restart (%v)", p, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "volumes", vol+".img")); err != nil {
		t.Errorf("the known volume's file: %v", err)
	}
	if st := s2.State(); len(st.Volumes) != 1 {
		t.Errorf("volumes after restart: %+v", st.Volumes)
	}
}
