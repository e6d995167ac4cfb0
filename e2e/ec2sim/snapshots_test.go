package ec2sim

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/stowage-csi/stowage/e2e/rig"
)

func volumeFile(t *testing.T, s *Server, id string) string {
	t.Helper()
	for _, v := range s.State().Volumes {
		if v.ID == id {
			return v.File
		}
	}
	t.Fatalf("no volume %s", id)
	return ""
}

func waitSnapshot(t *testing.T, c *ec2.Client, id string) types.Snapshot {
	t.Helper()
	var sn types.Snapshot
	rig.Eventually(t, ctxT(t), waitTimeout, id+" completed", func(ctx context.Context) (bool, error) {
		out, err := c.DescribeSnapshots(ctx, &ec2.DescribeSnapshotsInput{SnapshotIds: []string{id}})
		if err != nil {
			return false, err
		}
		if len(out.Snapshots) != 1 {
			return false, fmt.Errorf("DescribeSnapshots %s: %d snapshots", id, len(out.Snapshots))
		}
		sn = out.Snapshots[0]
		return sn.State == types.SnapshotStateCompleted, nil
	})
	return sn
}

func TestSnapshotLifecycleCopiesData(t *testing.T) {
	s := startServer(t, nil)
	c := newClient(t, s)
	ctx := ctxT(t)
	vol := createVolume(t, c, &ec2.CreateVolumeInput{Size: aws.Int32(1)})
	data := []byte("stowage snapshot payload")
	f, err := os.OpenFile(volumeFile(t, s, vol), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(data, 300<<20); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()

	desc := "Created by AWS EBS CSI driver for volume " + vol
	out, err := c.CreateSnapshot(ctx, &ec2.CreateSnapshotInput{VolumeId: aws.String(vol), Description: aws.String(desc),
		TagSpecifications: []types.TagSpecification{{ResourceType: types.ResourceTypeSnapshot, Tags: []types.Tag{{Key: aws.String("CSIVolumeSnapshotName"), Value: aws.String("snap-a")}}}}})
	if err != nil {
		t.Fatal(err)
	}
	if out.State != types.SnapshotStatePending || aws.ToString(out.VolumeId) != vol || aws.ToInt32(out.VolumeSize) != 1 || out.StartTime == nil || aws.ToString(out.Description) != desc {
		t.Errorf("CreateSnapshot answer %+v", out)
	}
	snapID := aws.ToString(out.SnapshotId)
	// A snapshot is the data at request time: later writes to the volume don't reach it.
	f, _ = os.OpenFile(volumeFile(t, s, vol), os.O_RDWR, 0)
	_, _ = f.WriteAt([]byte("overwritten later!!!!!!"), 300<<20)
	_ = f.Close()

	sn := waitSnapshot(t, c, snapID)
	if aws.ToString(sn.Progress) != "100%" || len(sn.Tags) != 1 {
		t.Errorf("completed snapshot %+v", sn)
	}
	restored := createVolume(t, c, &ec2.CreateVolumeInput{SnapshotId: aws.String(snapID), Size: aws.Int32(2)})
	v := describeVolume(t, c, restored)
	if aws.ToString(v.SnapshotId) != snapID || aws.ToInt32(v.Size) != 2 {
		t.Errorf("restored volume %+v", v)
	}
	got := make([]byte, len(data))
	rf, err := os.Open(volumeFile(t, s, restored))
	if err != nil {
		t.Fatal(err)
	}
	defer rf.Close()
	if _, err := rf.ReadAt(got, 300<<20); err != nil || !bytes.Equal(got, data) {
		t.Errorf("restored bytes %q, %v; want %q", got, err, data)
	}
	if fi, _ := rf.Stat(); fi.Size() != 2<<30 {
		t.Errorf("restored file size %d", fi.Size())
	}
	_, err = c.CreateVolume(ctx, &ec2.CreateVolumeInput{AvailabilityZone: aws.String(testZone), SnapshotId: aws.String(snapID), Size: aws.Int32(0)})
	wantCode(t, err, "InvalidParameterValue")

	if _, err := c.DeleteSnapshot(ctx, &ec2.DeleteSnapshotInput{SnapshotId: aws.String(snapID)}); err != nil {
		t.Fatal(err)
	}
	_, err = c.DeleteSnapshot(ctx, &ec2.DeleteSnapshotInput{SnapshotId: aws.String(snapID)})
	wantCode(t, err, "InvalidSnapshot.NotFound")
	_, err = c.CreateSnapshot(ctx, &ec2.CreateSnapshotInput{VolumeId: aws.String("vol-00000000000000001")})
	wantCode(t, err, "InvalidVolume.NotFound")
	_, err = c.CreateSnapshot(ctx, &ec2.CreateSnapshotInput{VolumeId: aws.String(vol), DryRun: aws.Bool(true)})
	wantCode(t, err, "DryRunOperation")
	if n := len(s.State().Snapshots); n != 0 {
		t.Errorf("%d snapshots left", n)
	}
}

func TestDescribeSnapshotsFiltersAndPaging(t *testing.T) {
	s := startServer(t, nil)
	c := newClient(t, s)
	ctx := ctxT(t)
	volA := createVolume(t, c, &ec2.CreateVolumeInput{Size: aws.Int32(1)})
	volB := createVolume(t, c, &ec2.CreateVolumeInput{Size: aws.Int32(1)})
	var ids []string
	for i := range 8 {
		vol := volA
		if i >= 6 {
			vol = volB
		}
		out, err := c.CreateSnapshot(ctx, &ec2.CreateSnapshotInput{VolumeId: aws.String(vol),
			TagSpecifications: []types.TagSpecification{{ResourceType: types.ResourceTypeSnapshot, Tags: []types.Tag{{Key: aws.String("CSIVolumeSnapshotName"), Value: aws.String("snap-" + string(rune('a'+i)))}}}}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, aws.ToString(out.SnapshotId))
	}
	out, err := c.DescribeSnapshots(ctx, &ec2.DescribeSnapshotsInput{Filters: []types.Filter{{Name: aws.String("tag:CSIVolumeSnapshotName"), Values: []string{"snap-c"}}}})
	if err != nil || len(out.Snapshots) != 1 || aws.ToString(out.Snapshots[0].SnapshotId) != ids[2] {
		t.Errorf("tag filter: %+v %v", out, err)
	}
	// ListSnapshots by source volume, paged as the driver does.
	var got []string
	p := ec2.NewDescribeSnapshotsPaginator(c, &ec2.DescribeSnapshotsInput{MaxResults: aws.Int32(5), Filters: []types.Filter{{Name: aws.String("volume-id"), Values: []string{volA}}}})
	pages := 0
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, sn := range page.Snapshots {
			got = append(got, aws.ToString(sn.SnapshotId))
		}
	}
	if len(got) != 6 || pages != 2 {
		t.Errorf("volume-id listing: %d snapshots in %d pages", len(got), pages)
	}
	_, err = c.DescribeSnapshots(ctx, &ec2.DescribeSnapshotsInput{SnapshotIds: []string{ids[0], "snap-00000000000000001"}})
	if msg := wantCode(t, err, "InvalidSnapshot.NotFound"); !strings.Contains(msg, "snap-00000000000000001") || strings.Contains(msg, ids[0]) {
		t.Errorf("NotFound message %q", msg)
	}
	_, err = c.DescribeSnapshots(ctx, &ec2.DescribeSnapshotsInput{MaxResults: aws.Int32(4)})
	wantCode(t, err, "InvalidParameterValue")
	// MaxResults=0 is sent (aws.Int32(0)) by drivers that mean "no limit", and EC2 reads it so; IDs with it too.
	out, err = c.DescribeSnapshots(ctx, &ec2.DescribeSnapshotsInput{MaxResults: aws.Int32(0)})
	if err != nil || len(out.Snapshots) != 8 || out.NextToken != nil {
		t.Errorf("MaxResults=0: %d snapshots, next token %v, %v; want all 8 in one page", len(out.Snapshots), out.NextToken, err)
	}
	if out, err := c.DescribeSnapshots(ctx, &ec2.DescribeSnapshotsInput{MaxResults: aws.Int32(0), SnapshotIds: ids[:1]}); err != nil || len(out.Snapshots) != 1 {
		t.Errorf("MaxResults=0 with an ID: %v, %v", out, err)
	}
	out, err = c.DescribeSnapshots(ctx, &ec2.DescribeSnapshotsInput{OwnerIds: []string{"self"}, Filters: []types.Filter{{Name: aws.String("status"), Values: []string{"pending", "completed"}}}})
	if err != nil || len(out.Snapshots) != 8 {
		t.Errorf("owner self: %d %v", len(out.Snapshots), err)
	}
	out, err = c.DescribeSnapshots(ctx, &ec2.DescribeSnapshotsInput{OwnerIds: []string{"amazon"}})
	if err != nil || len(out.Snapshots) != 0 {
		t.Errorf("owner amazon: %d %v", len(out.Snapshots), err)
	}
}

func TestEnableFastSnapshotRestores(t *testing.T) {
	s := startServer(t, nil)
	c := newClient(t, s)
	ctx := ctxT(t)
	vol := createVolume(t, c, &ec2.CreateVolumeInput{Size: aws.Int32(1)})
	snap := createSnapshot(t, c, vol)
	out, err := c.EnableFastSnapshotRestores(ctx, &ec2.EnableFastSnapshotRestoresInput{
		AvailabilityZones: []string{testZone, "us-east-1b"}, SourceSnapshotIds: []string{snap, "snap-00000000000000001"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Successful) != 2 || out.Successful[0].State != types.FastSnapshotRestoreStateCodeEnabling {
		t.Errorf("successful %+v", out.Successful)
	}
	if len(out.Unsuccessful) != 1 || len(out.Unsuccessful[0].FastSnapshotRestoreStateErrors) != 2 ||
		aws.ToString(out.Unsuccessful[0].FastSnapshotRestoreStateErrors[0].Error.Code) != "InvalidSnapshot.NotFound" {
		t.Errorf("unsuccessful %+v", out.Unsuccessful)
	}
	_, err = c.EnableFastSnapshotRestores(ctx, &ec2.EnableFastSnapshotRestoresInput{AvailabilityZones: []string{"us-east-1z"}, SourceSnapshotIds: []string{snap}})
	wantCode(t, err, "InvalidParameterValue")
	waitSnapshot(t, c, snap)
	restored := createVolume(t, c, &ec2.CreateVolumeInput{SnapshotId: aws.String(snap)})
	if !aws.ToBool(describeVolume(t, c, restored).FastRestored) {
		t.Error("volume restored in an FSR zone is not fastRestored")
	}
}

func TestCreateAndDeleteTags(t *testing.T) {
	s := startServer(t, nil)
	c := newClient(t, s)
	ctx := ctxT(t)
	vol := createVolume(t, c, &ec2.CreateVolumeInput{Size: aws.Int32(1)})
	snap := createSnapshot(t, c, vol)
	tags := func(kv ...string) []types.Tag {
		var out []types.Tag
		for i := 0; i+1 < len(kv); i += 2 {
			out = append(out, types.Tag{Key: aws.String(kv[i]), Value: aws.String(kv[i+1])})
		}
		return out
	}
	if _, err := c.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{vol, snap}, Tags: tags("a", "1", "b", "2", "c", "3")}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{vol}, Tags: tags("a", "10")}); err != nil {
		t.Fatal(err)
	}
	// Delete b only if its value matches (it doesn't), c whatever its value.
	if _, err := c.DeleteTags(ctx, &ec2.DeleteTagsInput{Resources: []string{vol}, Tags: []types.Tag{{Key: aws.String("b"), Value: aws.String("nope")}, {Key: aws.String("c")}}}); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, tg := range describeVolume(t, c, vol).Tags {
		got[aws.ToString(tg.Key)] = aws.ToString(tg.Value)
	}
	if len(got) != 2 || got["a"] != "10" || got["b"] != "2" {
		t.Errorf("volume tags %v", got)
	}
	sn, err := c.DescribeSnapshots(ctx, &ec2.DescribeSnapshotsInput{Filters: []types.Filter{{Name: aws.String("tag:c"), Values: []string{"3"}}}})
	if err != nil || len(sn.Snapshots) != 1 {
		t.Errorf("snapshot tags: %+v %v", sn, err)
	}
	_, err = c.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{"vol-00000000000000001"}, Tags: tags("a", "1")})
	wantCode(t, err, "InvalidVolume.NotFound")
	_, err = c.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{"i-1"}, Tags: tags("a", "1")})
	wantCode(t, err, "InvalidID")
	_, err = c.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{vol}, Tags: tags("aws:x", "1")})
	wantCode(t, err, "InvalidParameterValue")
	_, err = c.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{vol}, Tags: tags("z", "1"), DryRun: aws.Bool(true)})
	wantCode(t, err, "DryRunOperation")
	var many []string
	for i := range 49 {
		many = append(many, "k"+string(rune('A'+i%26))+string(rune('a'+i/26)), "v")
	}
	_, err = c.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{vol}, Tags: tags(many...)})
	wantCode(t, err, "TagLimitExceeded")
}
