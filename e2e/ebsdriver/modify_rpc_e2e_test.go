//go:build e2e

package ebsdriver

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/stowage-csi/stowage/e2e/rig"
)

// rawCodec sends and receives protobuf bytes as they are, so the test speaks modify.proto's wire format
// (encoded here by hand) without the driver's descriptors.
type rawCodec struct{}

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(*(v.(*[]byte)))}, nil
}
func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	*(v.(*[]byte)) = data.Materialize()
	return nil
}
func (rawCodec) Name() string { return "proto" }

// modifyVolumePropertiesRequest encodes modify.v1.ModifyVolumePropertiesRequest{name, parameters}.
func modifyVolumePropertiesRequest(name string, params map[string]string) []byte {
	var b []byte
	b = protowire.AppendTag(b, 1, protowire.BytesType)
	b = protowire.AppendString(b, name)
	for k, v := range params {
		var e []byte
		e = protowire.AppendTag(e, 1, protowire.BytesType)
		e = protowire.AppendString(e, k)
		e = protowire.AppendTag(e, 2, protowire.BytesType)
		e = protowire.AppendString(e, v)
		b = protowire.AppendTag(b, 2, protowire.BytesType)
		b = protowire.AppendBytes(b, e)
	}
	return b
}

// TestE2EEBSModifyVolumeProperties calls the controller's modify.v1.Modify service on the CSI socket as
// upstream's volume-modifier-for-k8s sidecar does (PVC annotations ebs.csi.aws.com/type and /iops): the
// capability call answers, the gp3 volume becomes io2 with 4000 IOPS in ec2sim, and a malformed value is
// InvalidArgument naming the annotation's key.
func TestE2EEBSModifyVolumeProperties(t *testing.T) {
	d := controllerDriver(t, "i-0d0d00000000000d1")
	ctx := testContext(t, 2*time.Minute)
	id := d.createVolume(ctx, volumeRequest("annotated", 10, mountCapability(""), map[string]string{"type": "gp3"}))
	call := func(method string, req []byte) error {
		var resp []byte
		return d.p.conn.Invoke(ctx, "/modify.v1.Modify/"+method, &req, &resp, grpc.ForceCodecV2(rawCodec{}))
	}
	if err := call("GetCSIDriverModificationCapability", nil); err != nil {
		t.Fatalf("GetCSIDriverModificationCapability: %v", err)
	}
	if err := call("ModifyVolumeProperties", modifyVolumePropertiesRequest(id, map[string]string{"iops": "many"})); status.Code(err) != codes.InvalidArgument ||
		!strings.Contains(err.Error(), "iops") {
		t.Fatalf("malformed iops: %v, want InvalidArgument naming iops", err)
	}
	if err := call("ModifyVolumeProperties", modifyVolumePropertiesRequest(id, map[string]string{"type": "io2", "iops": "4000"})); err != nil {
		t.Fatalf("ModifyVolumeProperties: %v", err)
	}
	rig.Eventually(t, ctx, time.Minute, "volume "+id+" modified to io2/4000", func(context.Context) (bool, error) {
		for _, v := range d.sim.State().Volumes {
			if v.ID == id {
				return v.Type == "io2" && v.Iops == 4000, fmt.Errorf("type %s iops %d", v.Type, v.Iops)
			}
		}
		return false, fmt.Errorf("volume %s gone", id)
	})
}
