package ec2sim

import (
	"math"
	"regexp"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

func TestCreateVolumeValidatesLikeEC2(t *testing.T) {
	s := startServer(t, nil)
	c := newClient(t, s)
	tests := []struct {
		name     string
		in       ec2.CreateVolumeInput
		wantCode string
		wantMsg  string
	}{
		{"gp3 too small", ec2.CreateVolumeInput{VolumeType: "gp3", Size: aws.Int32(0)}, "InvalidParameterValue", "too small"},
		{"gp3 too large", ec2.CreateVolumeInput{VolumeType: "gp3", Size: aws.Int32(65537)}, "InvalidParameterValue", "maximum is 65536GiB"},
		{"io2 block express size", ec2.CreateVolumeInput{VolumeType: "io2", Size: aws.Int32(65537), Iops: aws.Int32(1000)}, "InvalidParameterValue", "maximum is 65536GiB"},
		{"io1 too small", ec2.CreateVolumeInput{VolumeType: "io1", Size: aws.Int32(3), Iops: aws.Int32(100)}, "InvalidParameterValue", "minimum is 4GiB"},
		{"st1 too small", ec2.CreateVolumeInput{VolumeType: "st1", Size: aws.Int32(100)}, "InvalidParameterValue", "minimum is 125GiB"},
		{"standard too large", ec2.CreateVolumeInput{VolumeType: "standard", Size: aws.Int32(1025)}, "InvalidParameterValue", "maximum is 1024GiB"},
		{"unknown type", ec2.CreateVolumeInput{VolumeType: "gp9", Size: aws.Int32(1)}, "InvalidParameterValue", "volumeType"},
		{"gp3 iops too high", ec2.CreateVolumeInput{VolumeType: "gp3", Size: aws.Int32(200), Iops: aws.Int32(80001)}, "InvalidParameterValue", "Volume iops of 80001 is too high; maximum is 80000."},
		{"gp3 iops too low", ec2.CreateVolumeInput{VolumeType: "gp3", Size: aws.Int32(100), Iops: aws.Int32(2999)}, "InvalidParameterValue", "minimum is 3000"},
		{"gp3 iops ratio", ec2.CreateVolumeInput{VolumeType: "gp3", Size: aws.Int32(8), Iops: aws.Int32(5000)}, "InvalidParameterValue", "ratio of 625.000000 is too high; maximum is 500.000000"},
		{"io1 ratio", ec2.CreateVolumeInput{VolumeType: "io1", Size: aws.Int32(10), Iops: aws.Int32(501)}, "InvalidParameterValue", "maximum is 50.000000"},
		{"io2 ratio", ec2.CreateVolumeInput{VolumeType: "io2", Size: aws.Int32(10), Iops: aws.Int32(10001)}, "InvalidParameterValue", "maximum is 1000.000000"},
		{"io1 needs iops", ec2.CreateVolumeInput{VolumeType: "io1", Size: aws.Int32(10)}, "MissingParameter", "iops"},
		{"gp2 iops", ec2.CreateVolumeInput{VolumeType: "gp2", Size: aws.Int32(10), Iops: aws.Int32(300)}, "InvalidParameterCombination", "The parameter iops is not supported for gp2 volumes."},
		{"io2 throughput", ec2.CreateVolumeInput{VolumeType: "io2", Size: aws.Int32(10), Iops: aws.Int32(1000), Throughput: aws.Int32(200)}, "InvalidParameterCombination", "throughput is not supported"},
		{"gp3 throughput too high", ec2.CreateVolumeInput{VolumeType: "gp3", Size: aws.Int32(200), Iops: aws.Int32(80000), Throughput: aws.Int32(2001)}, "InvalidParameterValue", "maximum is 2000"},
		{"gp3 throughput too low", ec2.CreateVolumeInput{VolumeType: "gp3", Size: aws.Int32(100), Throughput: aws.Int32(124)}, "InvalidParameterValue", "minimum is 125"},
		{"gp3 throughput per iops", ec2.CreateVolumeInput{VolumeType: "gp3", Size: aws.Int32(100), Iops: aws.Int32(3000), Throughput: aws.Int32(751)}, "InvalidParameterValue", "maximum is 0.250000 MiBps per iops"},
		{"gp3 multi-attach", ec2.CreateVolumeInput{VolumeType: "gp3", Size: aws.Int32(10), MultiAttachEnabled: aws.Bool(true)}, "InvalidParameterCombination", "multiAttachEnabled"},
		{"no size", ec2.CreateVolumeInput{VolumeType: "gp3"}, "MissingParameter", "size"},
		{"bad zone", ec2.CreateVolumeInput{VolumeType: "gp3", Size: aws.Int32(1), AvailabilityZone: aws.String("us-east-1z")}, "InvalidParameterValue", "Invalid availability zone: [us-east-1z]"},
		{"zone and zone ID", ec2.CreateVolumeInput{VolumeType: "gp3", Size: aws.Int32(1), AvailabilityZone: aws.String(testZone), AvailabilityZoneId: aws.String("use1-az1")}, "InvalidParameterCombination", "availabilityZoneId"},
		{"kms without encryption", ec2.CreateVolumeInput{VolumeType: "gp3", Size: aws.Int32(1), KmsKeyId: aws.String("arn:aws:kms:us-east-1:123456789012:key/x")}, "InvalidParameterDependency", "Encrypted"},
		{"missing snapshot", ec2.CreateVolumeInput{SnapshotId: aws.String("snap-0123456789abcdef0")}, "InvalidSnapshot.NotFound", "snap-0123456789abcdef0"},
		{"malformed snapshot", ec2.CreateVolumeInput{SnapshotId: aws.String("snapshot-1")}, "InvalidSnapshotID.Malformed", "snapshot-1"},
		{"wrong tag resource type", ec2.CreateVolumeInput{VolumeType: "gp3", Size: aws.Int32(1), TagSpecifications: []types.TagSpecification{{ResourceType: types.ResourceTypeSnapshot, Tags: []types.Tag{{Key: aws.String("a"), Value: aws.String("b")}}}}}, "InvalidParameterValue", "snapshot"},
		{"reserved tag", ec2.CreateVolumeInput{VolumeType: "gp3", Size: aws.Int32(1), TagSpecifications: []types.TagSpecification{{ResourceType: types.ResourceTypeVolume, Tags: []types.Tag{{Key: aws.String("aws:x"), Value: aws.String("b")}}}}}, "InvalidParameterValue", "aws:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := tt.in
			if in.AvailabilityZone == nil && in.AvailabilityZoneId == nil {
				in.AvailabilityZone = aws.String(testZone)
			}
			_, err := c.CreateVolume(ctxT(t), &in)
			if msg := wantCode(t, err, tt.wantCode); !strings.Contains(msg, tt.wantMsg) {
				t.Errorf("message %q does not contain %q", msg, tt.wantMsg)
			}
		})
	}
	if st := s.State(); len(st.Volumes) != 0 {
		t.Errorf("invalid requests created volumes: %+v", st.Volumes)
	}
}

// The EBS driver learns each type's IOPS maximum from a DryRun CreateVolume with Iops=MaxInt32.
func TestCreateVolumeDryRunReportsMaxIops(t *testing.T) {
	s := startServer(t, nil)
	c := newClient(t, s)
	maxRe := regexp.MustCompile(`(?i)volume iops.*is too high.*maximum is (\d+)`)
	for typ, want := range map[types.VolumeType]string{"gp3": "80000", "io1": "64000", "io2": "256000"} {
		_, err := c.CreateVolume(ctxT(t), &ec2.CreateVolumeInput{
			AvailabilityZone: aws.String(testZone), VolumeType: typ, Size: aws.Int32(4), Iops: aws.Int32(math.MaxInt32), DryRun: aws.Bool(true),
			TagSpecifications: []types.TagSpecification{{ResourceType: types.ResourceTypeVolume, Tags: []types.Tag{{Key: aws.String("CSIVolumeName"), Value: aws.String("IopsLimitDryRun")}}}},
		})
		msg := wantCode(t, err, "InvalidParameterValue")
		m := maxRe.FindStringSubmatch(msg)
		if m == nil || m[1] != want {
			t.Errorf("%s: message %q, want maximum %s", typ, msg, want)
		}
	}
	_, err := c.CreateVolume(ctxT(t), &ec2.CreateVolumeInput{AvailabilityZone: aws.String(testZone), VolumeType: "gp2", Size: aws.Int32(4), Iops: aws.Int32(math.MaxInt32), DryRun: aws.Bool(true)})
	if msg := wantCode(t, err, "InvalidParameterCombination"); !strings.Contains(msg, "parameter iops is not supported") {
		t.Errorf("gp2: %q", msg)
	}
	_, err = c.CreateVolume(ctxT(t), &ec2.CreateVolumeInput{AvailabilityZone: aws.String(testZone), VolumeType: "gp3", Size: aws.Int32(4), DryRun: aws.Bool(true)})
	wantCode(t, err, "DryRunOperation")
	if st := s.State(); len(st.Volumes) != 0 {
		t.Errorf("DryRun created volumes: %+v", st.Volumes)
	}
}

func TestCreateVolumeDefaultsAndEncryption(t *testing.T) {
	s := startServer(t, nil)
	c := newClient(t, s)
	ctx := ctxT(t)
	out, err := c.CreateVolume(ctx, &ec2.CreateVolumeInput{AvailabilityZoneId: aws.String("use1-az2"), Size: aws.Int32(50), Encrypted: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	if out.VolumeType != types.VolumeTypeGp2 || aws.ToInt32(out.Iops) != 150 || out.Throughput != nil || aws.ToString(out.AvailabilityZone) != "us-east-1b" ||
		!aws.ToBool(out.Encrypted) || !strings.HasPrefix(aws.ToString(out.KmsKeyId), "arn:aws:kms:us-east-1:123456789012:key/") {
		t.Errorf("defaults: type %s iops %d throughput %v zone %s encrypted %v key %s", out.VolumeType, aws.ToInt32(out.Iops), out.Throughput,
			aws.ToString(out.AvailabilityZone), aws.ToBool(out.Encrypted), aws.ToString(out.KmsKeyId))
	}
	io2, err := c.CreateVolume(ctx, &ec2.CreateVolumeInput{AvailabilityZone: aws.String(testZone), VolumeType: "io2", Size: aws.Int32(10), Iops: aws.Int32(10000), MultiAttachEnabled: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	if aws.ToInt32(io2.Iops) != 10000 || !aws.ToBool(io2.MultiAttachEnabled) {
		t.Errorf("io2: iops %d multi-attach %v", aws.ToInt32(io2.Iops), aws.ToBool(io2.MultiAttachEnabled))
	}
}

// TestClientTokenIgnoresTagOrder: EC2 compares a retried request's parameters, not their order, so the same
// tags sent in another order (a Go map iterated anew by the retrying driver) answer the first volume, while a
// changed tag value is still a mismatch.
func TestClientTokenIgnoresTagOrder(t *testing.T) {
	s := startServer(t, nil)
	c := newClient(t, s)
	ctx := ctxT(t)
	in := func(tags ...types.Tag) *ec2.CreateVolumeInput {
		return &ec2.CreateVolumeInput{AvailabilityZone: aws.String(testZone), Size: aws.Int32(10), VolumeType: "gp3",
			ClientToken:       aws.String("tok-tags"),
			TagSpecifications: []types.TagSpecification{{ResourceType: types.ResourceTypeVolume, Tags: tags}}}
	}
	a := types.Tag{Key: aws.String("CSIVolumeName"), Value: aws.String("pvc-1")}
	b := types.Tag{Key: aws.String("ebs.csi.aws.com/cluster"), Value: aws.String("true")}
	first, err := c.CreateVolume(ctx, in(a, b))
	if err != nil {
		t.Fatal(err)
	}
	again, err := c.CreateVolume(ctx, in(b, a))
	if err != nil {
		t.Fatalf("same tags in another order: %v", err)
	}
	if aws.ToString(again.VolumeId) != aws.ToString(first.VolumeId) {
		t.Errorf("same token and tags made %s and %s", aws.ToString(first.VolumeId), aws.ToString(again.VolumeId))
	}
	changed := b
	changed.Value = aws.String("false")
	_, err = c.CreateVolume(ctx, in(changed, a))
	wantCode(t, err, "IdempotentParameterMismatch")
	if n := len(s.State().Volumes); n != 1 {
		t.Errorf("%d volumes, want 1", n)
	}
}

func TestCreateVolumeClientTokenIdempotency(t *testing.T) {
	s := startServer(t, nil)
	c := newClient(t, s)
	ctx := ctxT(t)
	in := func(size int32) *ec2.CreateVolumeInput {
		return &ec2.CreateVolumeInput{AvailabilityZone: aws.String(testZone), Size: aws.Int32(size), VolumeType: "gp3", ClientToken: aws.String("tok-1")}
	}
	first, err := c.CreateVolume(ctx, in(10))
	if err != nil {
		t.Fatal(err)
	}
	again, err := c.CreateVolume(ctx, in(10))
	if err != nil {
		t.Fatal(err)
	}
	if aws.ToString(again.VolumeId) != aws.ToString(first.VolumeId) {
		t.Errorf("same token made %s and %s", aws.ToString(first.VolumeId), aws.ToString(again.VolumeId))
	}
	_, err = c.CreateVolume(ctx, in(11))
	wantCode(t, err, "IdempotentParameterMismatch")

	waitVolumeState(t, c, aws.ToString(first.VolumeId), types.VolumeStateAvailable)
	if _, err := c.DeleteVolume(ctx, &ec2.DeleteVolumeInput{VolumeId: first.VolumeId}); err != nil {
		t.Fatal(err)
	}
	_, err = c.CreateVolume(ctx, in(10))
	if msg := wantCode(t, err, "IdempotentParameterMismatch"); !strings.Contains(msg, "already deleted") {
		t.Errorf("reuse after delete: %q", msg)
	}
	if st := s.State(); len(st.Volumes) != 0 {
		t.Errorf("volumes left: %+v", st.Volumes)
	}
}

// sevenTaggedVolumes creates pvc-a..pvc-g, tagged team x and y in turn, and attaches the first.
func sevenTaggedVolumes(t *testing.T, c *ec2.Client) []string {
	t.Helper()
	var ids []string
	for i := range 7 {
		name := "pvc-" + string(rune('a'+i))
		ids = append(ids, createVolume(t, c, &ec2.CreateVolumeInput{Size: aws.Int32(1), VolumeType: "gp3",
			TagSpecifications: []types.TagSpecification{{ResourceType: types.ResourceTypeVolume, Tags: []types.Tag{
				{Key: aws.String("CSIVolumeName"), Value: aws.String(name)}, {Key: aws.String("team"), Value: aws.String([]string{"x", "y"}[i%2])}}}},
		}))
	}
	if err := attach(c, t, ids[0], testInstance, "/dev/xvdba"); err != nil {
		t.Fatal(err)
	}
	return ids
}

func TestDescribeVolumesFilters(t *testing.T) {
	c := newClient(t, startServer(t, nil))
	ctx := ctxT(t)
	ids := sevenTaggedVolumes(t, c)
	count := func(filters ...types.Filter) int {
		t.Helper()
		out, err := c.DescribeVolumes(ctx, &ec2.DescribeVolumesInput{Filters: filters})
		if err != nil {
			t.Fatalf("DescribeVolumes %+v: %v", filters, err)
		}
		return len(out.Volumes)
	}
	f := func(name string, values ...string) types.Filter {
		return types.Filter{Name: aws.String(name), Values: values}
	}
	for _, tt := range []struct {
		name    string
		filters []types.Filter
		want    int
	}{
		{"tag value", []types.Filter{f("tag:CSIVolumeName", "pvc-c")}, 1},
		{"tag any of", []types.Filter{f("tag:CSIVolumeName", "pvc-c", "pvc-d")}, 2},
		{"tag wildcard", []types.Filter{f("tag:CSIVolumeName", "pvc-*")}, 7},
		{"two filters", []types.Filter{f("tag:team", "x"), f("tag:CSIVolumeName", "pvc-a", "pvc-b", "pvc-c")}, 2},
		{"tag-key", []types.Filter{f("tag-key", "team")}, 7},
		{"tag-key missing", []types.Filter{f("tag-key", "nope")}, 0},
		{"volume-id", []types.Filter{f("volume-id", ids[3])}, 1},
		{"zone", []types.Filter{f("availability-zone", testZone)}, 7},
		{"other zone", []types.Filter{f("availability-zone", "us-east-1b")}, 0},
		{"status in-use", []types.Filter{f("status", "in-use")}, 1},
		{"status available", []types.Filter{f("status", "available")}, 6},
		{"attached to", []types.Filter{f("attachment.instance-id", testInstance)}, 1},
	} {
		if got := count(tt.filters...); got != tt.want {
			t.Errorf("%s: %d volumes, want %d", tt.name, got, tt.want)
		}
	}
	_, err := c.DescribeVolumes(ctx, &ec2.DescribeVolumesInput{Filters: []types.Filter{f("colour", "red")}})
	wantCode(t, err, "InvalidParameterValue")
}

func TestDescribeVolumesPagingAndNotFound(t *testing.T) {
	c := newClient(t, startServer(t, nil))
	ctx := ctxT(t)
	ids := sevenTaggedVolumes(t, c)
	// 5 + 2, with the SDK's paginator too.
	page1, err := c.DescribeVolumes(ctx, &ec2.DescribeVolumesInput{MaxResults: aws.Int32(5)})
	if err != nil {
		t.Fatal(err)
	}
	if len(page1.Volumes) != 5 || page1.NextToken == nil {
		t.Fatalf("page 1: %d volumes, token %v", len(page1.Volumes), page1.NextToken)
	}
	page2, err := c.DescribeVolumes(ctx, &ec2.DescribeVolumesInput{MaxResults: aws.Int32(5), NextToken: page1.NextToken})
	if err != nil {
		t.Fatal(err)
	}
	if len(page2.Volumes) != 2 || page2.NextToken != nil {
		t.Fatalf("page 2: %d volumes, token %v", len(page2.Volumes), page2.NextToken)
	}
	seen := map[string]bool{}
	p := ec2.NewDescribeVolumesPaginator(c, &ec2.DescribeVolumesInput{MaxResults: aws.Int32(5)})
	for p.HasMorePages() {
		out, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range out.Volumes {
			seen[aws.ToString(v.VolumeId)] = true
		}
	}
	if len(seen) != 7 {
		t.Errorf("paginator saw %d volumes", len(seen))
	}
	_, err = c.DescribeVolumes(ctx, &ec2.DescribeVolumesInput{MaxResults: aws.Int32(3)})
	wantCode(t, err, "InvalidParameterValue")
	_, err = c.DescribeVolumes(ctx, &ec2.DescribeVolumesInput{MaxResults: aws.Int32(5), VolumeIds: ids[:1]})
	wantCode(t, err, "InvalidParameterCombination")
	_, err = c.DescribeVolumes(ctx, &ec2.DescribeVolumesInput{NextToken: aws.String("!!")})
	wantCode(t, err, "InvalidParameterValue")

	// NotFound names every missing ID, and only those.
	_, err = c.DescribeVolumes(ctx, &ec2.DescribeVolumesInput{VolumeIds: []string{ids[0], "vol-00000000000000001", "vol-00000000000000002"}})
	msg := wantCode(t, err, "InvalidVolume.NotFound")
	if !strings.Contains(msg, "vol-00000000000000001") || !strings.Contains(msg, "vol-00000000000000002") || strings.Contains(msg, ids[0]) {
		t.Errorf("NotFound message %q", msg)
	}
	_, err = c.DescribeVolumes(ctx, &ec2.DescribeVolumesInput{VolumeIds: []string{"volume-1"}})
	wantCode(t, err, "InvalidVolumeID.Malformed")
}

func TestCopyVolumes(t *testing.T) {
	s := startServer(t, nil)
	c := newClient(t, s)
	ctx := ctxT(t)
	src := createVolume(t, c, &ec2.CreateVolumeInput{Size: aws.Int32(4), VolumeType: "io2", Iops: aws.Int32(2000), Encrypted: aws.Bool(true)})
	out, err := c.CopyVolumes(ctx, &ec2.CopyVolumesInput{SourceVolumeId: aws.String(src), Size: aws.Int32(5), ClientToken: aws.String("clone-1"),
		TagSpecifications: []types.TagSpecification{{ResourceType: types.ResourceTypeVolume, Tags: []types.Tag{{Key: aws.String("CSIVolumeName"), Value: aws.String("clone")}}}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Volumes) != 1 {
		t.Fatalf("%d volumes", len(out.Volumes))
	}
	cl := out.Volumes[0]
	if aws.ToInt32(cl.Size) != 5 || cl.VolumeType != "io2" || aws.ToInt32(cl.Iops) != 2000 || !aws.ToBool(cl.Encrypted) || aws.ToString(cl.SourceVolumeId) != src {
		t.Errorf("clone %+v", cl)
	}
	again, err := c.CopyVolumes(ctx, &ec2.CopyVolumesInput{SourceVolumeId: aws.String(src), Size: aws.Int32(5), ClientToken: aws.String("clone-1"),
		TagSpecifications: []types.TagSpecification{{ResourceType: types.ResourceTypeVolume, Tags: []types.Tag{{Key: aws.String("CSIVolumeName"), Value: aws.String("clone")}}}}})
	if err != nil || aws.ToString(again.Volumes[0].VolumeId) != aws.ToString(cl.VolumeId) {
		t.Errorf("idempotent copy: %v %v", again, err)
	}
	waitVolumeState(t, c, aws.ToString(cl.VolumeId), types.VolumeStateAvailable)
	_, err = c.CopyVolumes(ctx, &ec2.CopyVolumesInput{SourceVolumeId: aws.String(src), Size: aws.Int32(3)})
	wantCode(t, err, "InvalidParameterValue")
	_, err = c.CopyVolumes(ctx, &ec2.CopyVolumesInput{SourceVolumeId: aws.String("vol-00000000000000001")})
	wantCode(t, err, "InvalidVolume.NotFound")
	_, err = c.CopyVolumes(ctx, &ec2.CopyVolumesInput{SourceVolumeId: aws.String(src), Encrypted: aws.Bool(false)})
	wantCode(t, err, "InvalidParameterCombination")
}

func TestDeleteVolumeErrors(t *testing.T) {
	s := startServer(t, nil)
	c := newClient(t, s)
	ctx := ctxT(t)
	_, err := c.DeleteVolume(ctx, &ec2.DeleteVolumeInput{VolumeId: aws.String("vol-00000000000000001")})
	wantCode(t, err, "InvalidVolume.NotFound")
	id := createVolume(t, c, &ec2.CreateVolumeInput{Size: aws.Int32(1)})
	_, err = c.DeleteVolume(ctx, &ec2.DeleteVolumeInput{VolumeId: aws.String(id), DryRun: aws.Bool(true)})
	wantCode(t, err, "DryRunOperation")
	if len(s.State().Volumes) != 1 {
		t.Fatal("DryRun deleted the volume")
	}
}
