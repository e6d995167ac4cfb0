package csicontroller

import (
	"context"
	"maps"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func fsCap(mode csi.VolumeCapability_AccessMode_Mode) *csi.VolumeCapability {
	return &csi.VolumeCapability{
		AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: mode},
	}
}

var (
	rwx = fsCap(csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER)
	rox = fsCap(csi.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY)
	rwo = fsCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER)
)

func newServer(t *testing.T, buckets ...string) (*Server, *fakeS3) {
	f, c, url := newFakeS3(t, buckets...)
	return New(Options{S3: c, S3Endpoint: url, Version: "test"}), f
}

func TestCreateVolume(t *testing.T) {
	block := &csi.VolumeCapability{AccessType: &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER}}
	meta := map[string]string{paramPVCName: "data", paramPVCNamespace: "team-a"}
	with := func(p map[string]string, kv ...string) map[string]string {
		out := maps.Clone(p)
		for i := 0; i < len(kv); i += 2 {
			out[kv[i]] = kv[i+1]
		}
		return out
	}
	for _, tc := range []struct {
		name   string
		params map[string]string
		caps   []*csi.VolumeCapability
		wantID string
		wantVC map[string]string
		// wantCode and wantMsg (substrings) describe a failure.
		wantCode codes.Code
		wantMsg  []string
	}{
		{name: "bucket only: the prefix is the PV name", params: map[string]string{"bucketName": "shared"}, caps: []*csi.VolumeCapability{rwx},
			wantID: "dp1:keep:shared:pvc-1/", wantVC: map[string]string{"bucketName": "shared", "prefix": "pvc-1/"}},
		{name: "prefix and delete policy", params: map[string]string{"bucketName": "shared", "prefix": "/teams/a/", "deleteObjectsOnDelete": "true"}, caps: []*csi.VolumeCapability{rox, rwo},
			wantID: "dp1:delete:shared:teams/a/pvc-1/", wantVC: map[string]string{"bucketName": "shared", "prefix": "teams/a/pvc-1/"}},
		{name: "template from the claim's metadata", params: with(meta, "bucketName", "shared", "prefix", "${pvc.namespace}/${pvc.name}"), caps: []*csi.VolumeCapability{rwx},
			wantID: "dp1:keep:shared:team-a/data/pvc-1/", wantVC: map[string]string{"bucketName": "shared", "prefix": "team-a/data/pvc-1/"}},
		{name: "static attributes pass through", params: map[string]string{"bucketName": "shared", "authenticationSource": "pod", "mountpointEnv.HTTPS_PROXY": "http://p:3128"}, caps: []*csi.VolumeCapability{rwx},
			wantID: "dp1:keep:shared:pvc-1/", wantVC: map[string]string{"bucketName": "shared", "prefix": "pvc-1/", "authenticationSource": "pod", "mountpointEnv.HTTPS_PROXY": "http://p:3128"}},
		{name: "missing bucket names the parameter", params: map[string]string{"bucketName": "nope"}, caps: []*csi.VolumeCapability{rwx},
			wantCode: codes.InvalidArgument, wantMsg: []string{`bucketName="nope"`, "does not exist"}},
		{name: "forbidden bucket", params: map[string]string{"bucketName": "forbidden"}, caps: []*csi.VolumeCapability{rwx},
			wantCode: codes.PermissionDenied, wantMsg: []string{`bucketName="forbidden"`}},
		{name: "failing server is retriable", params: map[string]string{"bucketName": "broken"}, caps: []*csi.VolumeCapability{rwx},
			wantCode: codes.Unavailable, wantMsg: []string{"broken"}},
		{name: "no bucketName", params: map[string]string{"prefix": "x"}, caps: []*csi.VolumeCapability{rwx},
			wantCode: codes.InvalidArgument, wantMsg: []string{"bucketName is required"}},
		{name: "bucket with a colon", params: map[string]string{"bucketName": "arn:aws:s3:::b"}, caps: []*csi.VolumeCapability{rwx},
			wantCode: codes.InvalidArgument, wantMsg: []string{"bucketName"}},
		{name: "bad delete flag", params: map[string]string{"bucketName": "shared", "deleteObjectsOnDelete": "yes"}, caps: []*csi.VolumeCapability{rwx},
			wantCode: codes.InvalidArgument, wantMsg: []string{"deleteObjectsOnDelete"}},
		{name: "unknown parameter", params: map[string]string{"bucketName": "shared", "bucket": "x"}, caps: []*csi.VolumeCapability{rwx},
			wantCode: codes.InvalidArgument, wantMsg: []string{"unknown parameters bucket "}},
		{name: "prefix with ..", params: map[string]string{"bucketName": "shared", "prefix": "a/../b"}, caps: []*csi.VolumeCapability{rwx},
			wantCode: codes.InvalidArgument, wantMsg: []string{"prefix"}},
		{name: "unknown template variable", params: map[string]string{"bucketName": "shared", "prefix": "${pvc.uid}"}, caps: []*csi.VolumeCapability{rwx},
			wantCode: codes.InvalidArgument, wantMsg: []string{"prefix", "${pvc.name}"}},
		{name: "template without --extra-create-metadata", params: map[string]string{"bucketName": "shared", "prefix": "${pvc.name}"}, caps: []*csi.VolumeCapability{rwx},
			wantCode: codes.InvalidArgument, wantMsg: []string{"prefix", "--extra-create-metadata"}},
		{name: "block refused", params: map[string]string{"bucketName": "shared"}, caps: []*csi.VolumeCapability{block},
			wantCode: codes.InvalidArgument, wantMsg: []string{"block access is not supported"}},
		{name: "no capabilities", params: map[string]string{"bucketName": "shared"},
			wantCode: codes.InvalidArgument, wantMsg: []string{"volume_capabilities are required"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, f := newServer(t, "shared", "forbidden", "broken")
			f.status["forbidden"], f.status["broken"] = 403, 500
			req := &csi.CreateVolumeRequest{Name: "pvc-1", Parameters: tc.params, VolumeCapabilities: tc.caps,
				CapacityRange: &csi.CapacityRange{RequiredBytes: 5 << 30}}
			resp, err := s.CreateVolume(context.Background(), req)
			if tc.wantCode != codes.OK {
				if status.Code(err) != tc.wantCode {
					t.Fatalf("got %v, want code %s", err, tc.wantCode)
				}
				for _, m := range tc.wantMsg {
					if !strings.Contains(err.Error(), m) {
						t.Errorf("error %q does not say %q", err, m)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			v := resp.GetVolume()
			if v.GetVolumeId() != tc.wantID || !maps.Equal(v.GetVolumeContext(), tc.wantVC) || v.GetCapacityBytes() != 5<<30 {
				t.Errorf("got %q %v %d, want %q %v", v.GetVolumeId(), v.GetVolumeContext(), v.GetCapacityBytes(), tc.wantID, tc.wantVC)
			}
			// Idempotent: the same request gives the same volume, and nothing was written to S3.
			again, err := s.CreateVolume(context.Background(), req)
			if err != nil || again.GetVolume().GetVolumeId() != v.GetVolumeId() {
				t.Errorf("repeated CreateVolume: %v, %v", again, err)
			}
			if keys := f.keys("shared"); len(keys) != 0 {
				t.Errorf("CreateVolume wrote %v", keys)
			}
		})
	}
}

// TestCreateVolumeUniquePerName: two claims of one class never share a prefix.
func TestCreateVolumeUniquePerName(t *testing.T) {
	s, _ := newServer(t, "shared")
	ids := map[string]bool{}
	for _, name := range []string{"pvc-1", "pvc-10", "pvc-2"} {
		resp, err := s.CreateVolume(context.Background(), &csi.CreateVolumeRequest{Name: name,
			Parameters: map[string]string{"bucketName": "shared", "prefix": "p"}, VolumeCapabilities: []*csi.VolumeCapability{rwx}})
		if err != nil {
			t.Fatal(err)
		}
		id := resp.GetVolume().GetVolumeId()
		if ids[id] {
			t.Fatalf("ID %s given twice", id)
		}
		ids[id] = true
		if want := "p/" + name + "/"; resp.GetVolume().GetVolumeContext()["prefix"] != want {
			t.Errorf("prefix %q, want %q", resp.GetVolume().GetVolumeContext()["prefix"], want)
		}
	}
}

func TestCreateVolumeRefusesContentSource(t *testing.T) {
	s, _ := newServer(t, "shared")
	_, err := s.CreateVolume(context.Background(), &csi.CreateVolumeRequest{Name: "pvc-1",
		Parameters: map[string]string{"bucketName": "shared"}, VolumeCapabilities: []*csi.VolumeCapability{rwx},
		VolumeContentSource: &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Volume{Volume: &csi.VolumeContentSource_VolumeSource{VolumeId: "x"}}}})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "volume_content_source") {
		t.Fatalf("got %v", err)
	}
}
