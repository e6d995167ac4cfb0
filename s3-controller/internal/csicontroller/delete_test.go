package csicontroller

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestDeleteVolume(t *testing.T) {
	others := []string{"a/pvc-10/x", "a/pvc-1", "pvc-1/y", "b/pvc-1/z"}
	for _, tc := range []struct {
		name     string
		id       string
		objects  []string // in bucket "shared" besides others
		wantLeft []string // of objects; others must always stay
		wantCode codes.Code
	}{
		{name: "keep policy leaves the objects", id: "dp1:keep:shared:a/pvc-1/", objects: []string{"a/pvc-1/f"}, wantLeft: []string{"a/pvc-1/f"}},
		{name: "delete policy removes exactly the prefix", id: "dp1:delete:shared:a/pvc-1/", objects: []string{"a/pvc-1/f", "a/pvc-1/d/g"}},
		{name: "delete policy pages through more than 1000 keys", id: "dp1:delete:shared:a/pvc-1/", objects: manyKeys("a/pvc-1/k", 2100)},
		{name: "empty prefix is success", id: "dp1:delete:shared:a/pvc-1/"},
		{name: "missing bucket is success", id: "dp1:delete:gone:a/pvc-1/"},
		{name: "static volume handle is success and touches nothing", id: "my-static-volume"},
		{name: "malformed dynamic ID", id: "dp1:purge:shared:a/pvc-1/", wantCode: codes.InvalidArgument},
		{name: "dynamic ID without a terminated prefix", id: "dp1:delete:shared:a/pvc-1", wantCode: codes.InvalidArgument},
		{name: "dynamic ID with an empty prefix", id: "dp1:delete:shared:", wantCode: codes.InvalidArgument},
		{name: "server failure", id: "dp1:delete:broken:a/pvc-1/", wantCode: codes.Internal},
		{name: "no ID", wantCode: codes.InvalidArgument},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, f := newServer(t, "shared", "broken")
			f.status["broken"] = 500
			f.put("shared", others...)
			f.put("shared", tc.objects...)
			_, err := s.DeleteVolume(context.Background(), &csi.DeleteVolumeRequest{VolumeId: tc.id})
			if status.Code(err) != tc.wantCode {
				t.Fatalf("got %v, want %s", err, tc.wantCode)
			}
			want := append(slices.Clone(others), tc.wantLeft...)
			slices.Sort(want)
			if got := f.keys("shared"); !slices.Equal(got, want) {
				t.Errorf("objects left %v, want %v", got, want)
			}
			if err != nil {
				return
			}
			// Idempotent: a second call succeeds and changes nothing.
			if _, err := s.DeleteVolume(context.Background(), &csi.DeleteVolumeRequest{VolumeId: tc.id}); err != nil {
				t.Errorf("second DeleteVolume: %v", err)
			}
			if got := f.keys("shared"); !slices.Equal(got, want) {
				t.Errorf("objects after the second call %v, want %v", got, want)
			}
		})
	}
}

func manyKeys(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%05d", prefix, i)
	}
	return out
}

func TestVolumeIDRoundTrip(t *testing.T) {
	for _, v := range []volumeID{
		{Bucket: "b", Prefix: "pvc-1/"},
		{Bucket: "my.bucket-1", Prefix: "a:b/c/pvc-1/", DeleteObjects: true},
	} {
		got, err := parseVolumeID(v.String())
		if err != nil || got != v {
			t.Errorf("%q: got %+v, %v", v.String(), got, err)
		}
	}
}

func TestControllerServiceSurface(t *testing.T) {
	s, _ := newServer(t, "shared")
	caps, err := s.ControllerGetCapabilities(context.Background(), &csi.ControllerGetCapabilitiesRequest{})
	if err != nil || len(caps.GetCapabilities()) != 1 || caps.GetCapabilities()[0].GetRpc().GetType() != csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME {
		t.Fatalf("capabilities %v, %v", caps, err)
	}
	if _, err := s.ControllerPublishVolume(context.Background(), &csi.ControllerPublishVolumeRequest{}); status.Code(err) != codes.Unimplemented {
		t.Errorf("ControllerPublishVolume: %v, want Unimplemented", err)
	}
	v, err := s.ValidateVolumeCapabilities(context.Background(), &csi.ValidateVolumeCapabilitiesRequest{VolumeId: "dp1:keep:shared:pvc-1/", VolumeCapabilities: []*csi.VolumeCapability{rwx}})
	if err != nil || v.GetConfirmed() == nil {
		t.Errorf("ValidateVolumeCapabilities(RWX): %v, %v", v, err)
	}
	if _, err := s.ValidateVolumeCapabilities(context.Background(), &csi.ValidateVolumeCapabilitiesRequest{VolumeId: "static", VolumeCapabilities: []*csi.VolumeCapability{rwx}}); status.Code(err) != codes.NotFound {
		t.Errorf("ValidateVolumeCapabilities(static): %v, want NotFound", err)
	}
	info, err := s.GetPluginInfo(context.Background(), &csi.GetPluginInfoRequest{})
	if err != nil || !strings.Contains(info.GetName(), "s3.csi.aws.com") {
		t.Errorf("GetPluginInfo: %v, %v", info, err)
	}
}
