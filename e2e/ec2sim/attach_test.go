package ec2sim

import (
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

func attach(c *ec2.Client, t *testing.T, vol, inst, dev string) error {
	t.Helper()
	_, err := c.AttachVolume(ctxT(t), &ec2.AttachVolumeInput{Device: aws.String(dev), InstanceId: aws.String(inst), VolumeId: aws.String(vol)})
	return err
}

func TestAttachVolumeRules(t *testing.T) {
	s := startServer(t, nil)
	c := newClient(t, s)
	ctx := ctxT(t)
	vol := createVolume(t, c, &ec2.CreateVolumeInput{Size: aws.Int32(1)})
	other := createVolume(t, c, &ec2.CreateVolumeInput{Size: aws.Int32(1)})
	otherZone := createVolume(t, c, &ec2.CreateVolumeInput{Size: aws.Int32(1), AvailabilityZone: aws.String("us-east-1b")})
	creating, err := c.CreateVolume(ctx, &ec2.CreateVolumeInput{Size: aws.Int32(1), AvailabilityZone: aws.String(testZone)})
	if err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	s.st.Volumes[aws.ToString(creating.VolumeId)].ReadyAt = time.Now().Add(time.Hour) // keep it creating
	s.mu.Unlock()

	tests := []struct {
		name, vol, inst, dev, code, msg string
	}{
		{"bad device name", vol, testInstance, "/dev/nvme1n1", "InvalidParameterValue", "not a valid EBS device name"},
		{"root device", vol, testInstance, "/dev/xvda", "InvalidParameterValue", "already in use"},
		{"unknown instance", vol, "i-00000000000000001", "/dev/xvdaa", "InvalidInstanceID.NotFound", "i-00000000000000001"},
		{"unknown volume", "vol-00000000000000001", testInstance, "/dev/xvdaa", "InvalidVolume.NotFound", "vol-00000000000000001"},
		{"zone mismatch", otherZone, testInstance, "/dev/xvdaa", "InvalidVolume.ZoneMismatch", "same availability zone"},
		{"still creating", aws.ToString(creating.VolumeId), testInstance, "/dev/xvdaa", "IncorrectState", "'creating'"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if msg := wantCode(t, attach(c, t, tt.vol, tt.inst, tt.dev), tt.code); !strings.Contains(msg, tt.msg) {
				t.Errorf("message %q lacks %q", msg, tt.msg)
			}
		})
	}
	if err := attach(c, t, vol, testInstance, "/dev/xvdaa"); err != nil {
		t.Fatal(err)
	}
	// The device name is taken while the first attachment is still attaching.
	if msg := wantCode(t, attach(c, t, other, testInstance, "/dev/xvdaa"), "InvalidParameterValue"); !strings.Contains(msg, "already in use") {
		t.Errorf("device in use: %q", msg)
	}
	wantCode(t, attach(c, t, vol, testInstance, "/dev/xvdab"), "VolumeInUse")
	_, err = c.AttachVolume(ctx, &ec2.AttachVolumeInput{Device: aws.String("/dev/xvdac"), InstanceId: aws.String(testInstance), VolumeId: aws.String(other), DryRun: aws.Bool(true)})
	wantCode(t, err, "DryRunOperation")
	_, err = c.AttachVolume(ctx, &ec2.AttachVolumeInput{Device: aws.String("/dev/xvdac"), InstanceId: aws.String(testInstance), VolumeId: aws.String(other), EbsCardIndex: aws.Int32(1)})
	wantCode(t, err, "InvalidParameterValue")
	waitAttached(t, c, vol, testInstance)
	v := describeVolume(t, c, vol)
	a := v.Attachments[0]
	if aws.ToString(a.Device) != "/dev/xvdaa" || a.AttachTime == nil || aws.ToString(a.InstanceId) != testInstance || aws.ToBool(a.DeleteOnTermination) {
		t.Errorf("attachment %+v", a)
	}
}

func TestMultiAttach(t *testing.T) {
	s := startServer(t, func(c *Config) {
		c.Instances = append(c.Instances, Instance{ID: "i-00000000000000a03", Zone: testZone, Type: "m5.large"})
	})
	c := newClient(t, s)
	io2 := createVolume(t, c, &ec2.CreateVolumeInput{Size: aws.Int32(4), VolumeType: "io2", Iops: aws.Int32(1000), MultiAttachEnabled: aws.Bool(true)})
	single := createVolume(t, c, &ec2.CreateVolumeInput{Size: aws.Int32(4), VolumeType: "io2", Iops: aws.Int32(1000)})
	for _, inst := range []string{testInstance, "i-00000000000000a03"} {
		if err := attach(c, t, io2, inst, "/dev/xvdba"); err != nil {
			t.Fatalf("multi-attach to %s: %v", inst, err)
		}
	}
	if err := attach(c, t, single, testInstance, "/dev/xvdbb"); err != nil {
		t.Fatal(err)
	}
	wantCode(t, attach(c, t, single, "i-00000000000000a03", "/dev/xvdbb"), "VolumeInUse")
	waitVolume(t, c, io2, "attached to both", func(v types.Volume) bool {
		return attachmentOf(v, testInstance) == types.VolumeAttachmentStateAttached &&
			attachmentOf(v, "i-00000000000000a03") == types.VolumeAttachmentStateAttached
	})
	if n := len(describeVolume(t, c, io2).Attachments); n != 2 {
		t.Errorf("%d attachments", n)
	}
}

func TestDetachVolume(t *testing.T) {
	s := startServer(t, nil)
	c := newClient(t, s)
	ctx := ctxT(t)
	vol := createVolume(t, c, &ec2.CreateVolumeInput{Size: aws.Int32(1)})
	detach := func(in *ec2.DetachVolumeInput) (*ec2.DetachVolumeOutput, error) { return c.DetachVolume(ctx, in) }

	_, err := detach(&ec2.DetachVolumeInput{VolumeId: aws.String(vol), InstanceId: aws.String(testInstance)})
	if msg := wantCode(t, err, "IncorrectState"); !strings.Contains(msg, "'available'") {
		t.Errorf("detach of an available volume: %q", msg)
	}
	_, err = detach(&ec2.DetachVolumeInput{VolumeId: aws.String("vol-00000000000000001"), InstanceId: aws.String(testInstance)})
	wantCode(t, err, "InvalidVolume.NotFound")
	if err := attach(c, t, vol, testInstance, "/dev/sdf"); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	s.instances["i-00000000000000b04"] = Instance{ID: "i-00000000000000b04", Zone: testZone, Type: "m5.large"}
	s.mu.Unlock()
	_, err = detach(&ec2.DetachVolumeInput{VolumeId: aws.String(vol), InstanceId: aws.String("i-00000000000000b04")})
	wantCode(t, err, "InvalidAttachment.NotFound")
	_, err = detach(&ec2.DetachVolumeInput{VolumeId: aws.String(vol), InstanceId: aws.String(testInstance), Device: aws.String("/dev/sdg")})
	wantCode(t, err, "InvalidAttachment.NotFound")
	waitAttached(t, c, vol, testInstance)

	out, err := detach(&ec2.DetachVolumeInput{VolumeId: aws.String(vol), InstanceId: aws.String(testInstance)})
	if err != nil {
		t.Fatal(err)
	}
	if out.State != types.VolumeAttachmentStateDetaching {
		t.Errorf("detach answer state %s", out.State)
	}
	waitVolumeState(t, c, vol, types.VolumeStateAvailable)
	if n := len(describeVolume(t, c, vol).Attachments); n != 0 {
		t.Errorf("%d attachments after detach", n)
	}

	// Force detaches an attachment stuck in attaching.
	s.SetFaults(Faults{StuckAttach: true})
	if err := attach(c, t, vol, testInstance, "/dev/sdf"); err != nil {
		t.Fatal(err)
	}
	if _, err := detach(&ec2.DetachVolumeInput{VolumeId: aws.String(vol), InstanceId: aws.String(testInstance), Force: aws.Bool(true)}); err != nil {
		t.Fatal(err)
	}
	waitVolumeState(t, c, vol, types.VolumeStateAvailable)
}

func TestAttachmentLimitPerInstanceType(t *testing.T) {
	s := startServer(t, func(c *Config) {
		c.Instances = []Instance{{ID: testInstance, Zone: testZone, Type: "m5.large"}}
	})
	c := newClient(t, s)
	// m5.large: 28 shared slots, minus the root volume and the network interface.
	slots := int(instanceTypes["m5.large"].volumeSlots())
	if slots != 26 {
		t.Fatalf("m5.large has %d volume slots, want 26", slots)
	}
	var names []string
	for _, a := range "abcdefghijklmnopqrstuvwxyz" {
		names = append(names, "/dev/xvda"+string(a))
	}
	names = append(names, "/dev/xvdba")
	for i := 0; i <= slots; i++ {
		vol := createVolume(t, c, &ec2.CreateVolumeInput{Size: aws.Int32(1)})
		err := attach(c, t, vol, testInstance, names[i])
		if i < slots && err != nil {
			t.Fatalf("attach %d: %v", i, err)
		}
		if i == slots {
			wantCode(t, err, "AttachmentLimitExceeded")
		}
	}
	inst, err := c.DescribeInstances(ctxT(t), &ec2.DescribeInstancesInput{InstanceIds: []string{testInstance}})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(inst.Reservations[0].Instances[0].BlockDeviceMappings); n != slots {
		t.Errorf("%d block device mappings, want %d", n, slots)
	}
}

func TestDescribeInstances(t *testing.T) {
	s := startServer(t, nil)
	c := newClient(t, s)
	ctx := ctxT(t)
	out, err := c.DescribeInstances(ctx, &ec2.DescribeInstancesInput{})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Reservations) != 2 {
		t.Fatalf("%d reservations", len(out.Reservations))
	}
	out, err = c.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{testInstance2}})
	if err != nil {
		t.Fatal(err)
	}
	in := out.Reservations[0].Instances[0]
	if aws.ToString(in.InstanceId) != testInstance2 || in.InstanceType != "m5.large" || aws.ToString(in.Placement.AvailabilityZone) != "us-east-1b" ||
		aws.ToString(in.RootDeviceName) != "/dev/xvda" || in.State.Name != types.InstanceStateNameRunning || len(in.NetworkInterfaces) != 1 {
		t.Errorf("instance %+v", in)
	}
	_, err = c.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{testInstance, "i-00000000000000001", "i-00000000000000002"}})
	msg := wantCode(t, err, "InvalidInstanceID.NotFound")
	if !strings.Contains(msg, "i-00000000000000001") || !strings.Contains(msg, "i-00000000000000002") || strings.Contains(msg, testInstance) {
		t.Errorf("NotFound message %q", msg)
	}
	_, err = c.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{"node-1"}})
	wantCode(t, err, "InvalidInstanceID.Malformed")
	out, err = c.DescribeInstances(ctx, &ec2.DescribeInstancesInput{Filters: []types.Filter{{Name: aws.String("availability-zone"), Values: []string{testZone}}}})
	if err != nil || len(out.Reservations) != 1 {
		t.Errorf("zone filter: %v %v", out, err)
	}
}

func TestDescribeInstanceTypes(t *testing.T) {
	s := startServer(t, nil)
	c := newClient(t, s)
	ctx := ctxT(t)
	for typ, want := range map[types.InstanceType]struct {
		max       int32
		limitType types.AttachmentLimitType
	}{
		"m5.large":  {28, types.AttachmentLimitTypeShared},
		"m7i.large": {32, types.AttachmentLimitTypeDedicated},
		"m4.large":  {39, types.AttachmentLimitTypeDedicated},
	} {
		out, err := c.DescribeInstanceTypes(ctx, &ec2.DescribeInstanceTypesInput{InstanceTypes: []types.InstanceType{typ}})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.InstanceTypes) != 1 {
			t.Fatalf("%s: %d types", typ, len(out.InstanceTypes))
		}
		ebs := out.InstanceTypes[0].EbsInfo
		if ebs == nil || aws.ToInt32(ebs.MaximumEbsAttachments) != want.max || ebs.AttachmentLimitType != want.limitType {
			t.Errorf("%s: ebsInfo %+v", typ, ebs)
		}
	}
	out, err := c.DescribeInstanceTypes(ctx, &ec2.DescribeInstanceTypesInput{InstanceTypes: []types.InstanceType{"r8gb.48xlarge"}})
	if err != nil || aws.ToInt32(out.InstanceTypes[0].EbsInfo.MaximumEbsCards) != 2 {
		t.Errorf("multi-card type: %+v %v", out, err)
	}
	_, err = c.DescribeInstanceTypes(ctx, &ec2.DescribeInstanceTypesInput{InstanceTypes: []types.InstanceType{"x9.huge"}})
	wantCode(t, err, "InvalidParameterValue")
	all := 0
	p := ec2.NewDescribeInstanceTypesPaginator(c, &ec2.DescribeInstanceTypesInput{MaxResults: aws.Int32(5)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		all += len(page.InstanceTypes)
	}
	if all != len(instanceTypes) {
		t.Errorf("paged %d types, want %d", all, len(instanceTypes))
	}
}
