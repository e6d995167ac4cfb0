package driver

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stowage-csi/stowage/ebs-plugin/internal/metadata"
	"github.com/stowage-csi/stowage/ebs-plugin/internal/testutil"
)

const testNode = "i-0123456789abcdef0"

type fakeMeta struct {
	inst *metadata.Instance
	err  error
}

func (f fakeMeta) Get(context.Context) (*metadata.Instance, error) { return f.inst, f.err }

func newTestDriver(t *testing.T, opts Options) (*Driver, *testutil.FakeCloud, *testutil.FakeMounter) {
	t.Helper()
	fc := testutil.NewFakeCloud(testNode)
	fm := testutil.NewFakeMounter()
	if opts.Mode == "" {
		opts.Mode = ModeAll
	}
	if opts.ModifyVolumeWindow == 0 {
		opts.ModifyVolumeWindow = 20 * time.Millisecond
	}
	if opts.VolumeAttachLimit == 0 {
		opts.VolumeAttachLimit = -1
	}
	if opts.ReservedVolumeAttachments == 0 {
		opts.ReservedVolumeAttachments = -1
	}
	meta := fakeMeta{inst: &metadata.Instance{InstanceID: testNode, InstanceType: "m5.large", AvailabilityZone: "us-east-1b", ENIs: 1}}
	d, err := New(opts, fc, fm, meta)
	if err != nil {
		t.Fatal(err)
	}
	return d, fc, fm
}

func mountCap(fs string, flags ...string) *csi.VolumeCapability {
	return &csi.VolumeCapability{
		AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{FsType: fs, MountFlags: flags}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
	}
}

func blockCap(mode csi.VolumeCapability_AccessMode_Mode) *csi.VolumeCapability {
	return &csi.VolumeCapability{
		AccessType: &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: mode},
	}
}

// wantCode checks err's gRPC code and that its message names every fragment.
func wantCode(t *testing.T, err error, code codes.Code, fragments ...string) {
	t.Helper()
	if status.Code(err) != code {
		t.Fatalf("code = %s (%v), want %s", status.Code(err), err, code)
	}
	for _, f := range fragments {
		if !strings.Contains(status.Convert(err).Message(), f) {
			t.Errorf("message %q does not name %q", status.Convert(err).Message(), f)
		}
	}
}
