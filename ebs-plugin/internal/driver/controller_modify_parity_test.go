package driver

import (
	"context"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"

	"github.com/stowage-csi/stowage/ebs-plugin/internal/cloud"
)

func TestControllerModifyVolumeMergedIOPS(t *testing.T) {
	tests := []struct {
		name     string
		disk     cloud.Disk
		in       map[string]string
		wantCode codes.Code
		wantMsg  []string
	}{
		{name: "type io2 on a small gp3 volume with 3000 IOPS", disk: cloud.Disk{CapacityGiB: 2, VolumeType: "gp3", IOPS: 3000},
			in: map[string]string{"type": "io2"}, wantCode: codes.InvalidArgument, wantMsg: []string{"type", "io2", "3000 IOPS"}},
		{name: "type io2 on a large gp3 volume", disk: cloud.Disk{CapacityGiB: 100, VolumeType: "gp3", IOPS: 3000},
			in: map[string]string{"type": "io2"}, wantCode: codes.OK},
		{name: "iops beyond io1 maximum once merged", disk: cloud.Disk{CapacityGiB: 2000, VolumeType: "io1", IOPS: 3000},
			in: map[string]string{"iops": "70000"}, wantCode: codes.InvalidArgument, wantMsg: []string{"iops", "64000"}},
		{name: "iops within io1 bounds", disk: cloud.Disk{CapacityGiB: 100, VolumeType: "io1", IOPS: 3000},
			in: map[string]string{"iops": "5000"}, wantCode: codes.OK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, fc, _ := newTestDriver(t, Options{})
			v := fc.AddVolume(tt.disk)
			_, err := d.ControllerModifyVolume(context.Background(), &csi.ControllerModifyVolumeRequest{VolumeId: v.VolumeID, MutableParameters: tt.in})
			wantCode(t, err, tt.wantCode, tt.wantMsg...)
			wantRuns := 1
			if tt.wantCode != codes.OK {
				wantRuns = 0
			}
			if n := fc.CallCount("ModifyDisk"); n != wantRuns {
				t.Fatalf("ModifyDisk ran %d times, want %d", n, wantRuns)
			}
		})
	}
	d, _, _ := newTestDriver(t, Options{})
	_, err := d.ControllerModifyVolume(context.Background(), &csi.ControllerModifyVolumeRequest{VolumeId: "vol-0fff", MutableParameters: map[string]string{"type": "io2"}})
	wantCode(t, err, codes.NotFound, "vol-0fff")
}

func TestControllerModifyVolumeIOPSPerGBTags(t *testing.T) {
	const perGB, allow = "ebs.csi.aws.com/IOPSPerGb", "ebs.csi.aws.com/AllowAutoIOPSIncreaseOnModify"
	tests := []struct {
		name     string
		tags     map[string]string
		in       map[string]string
		wantTags map[string]string // "" = absent
	}{
		{name: "iopsPerGB sets the tag", tags: map[string]string{},
			in: map[string]string{"iopspergb": "10"}, wantTags: map[string]string{perGB: "10", allow: ""}},
		{name: "iopsPerGB updates the tag and allow=true enables scaling", tags: map[string]string{perGB: "5"},
			in: map[string]string{"iopspergb": "20", "allowautoiopsincreaseonmodify": "true"}, wantTags: map[string]string{perGB: "20", allow: "true"}},
		{name: "allow=false clears both tags", tags: map[string]string{perGB: "5", allow: "true"},
			in: map[string]string{"allowautoiopsincreaseonmodify": "false"}, wantTags: map[string]string{perGB: "", allow: ""}},
		{name: "allow=false with iopsPerGB keeps the new rate but no scaling", tags: map[string]string{perGB: "5", allow: "true"},
			in: map[string]string{"iopspergb": "8", "allowautoiopsincreaseonmodify": "false"}, wantTags: map[string]string{perGB: "8", allow: ""}},
		{name: "neither key leaves the tags alone", tags: map[string]string{perGB: "5", allow: "true"},
			in: map[string]string{"throughput": "300"}, wantTags: map[string]string{perGB: "5", allow: "true"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, fc, _ := newTestDriver(t, Options{})
			v := fc.AddVolume(cloud.Disk{CapacityGiB: 100, VolumeType: "gp3", IOPS: 3000, Tags: tt.tags})
			if _, err := d.ControllerModifyVolume(context.Background(), &csi.ControllerModifyVolumeRequest{VolumeId: v.VolumeID, MutableParameters: tt.in}); err != nil {
				t.Fatal(err)
			}
			got, err := fc.GetDisk(context.Background(), v.VolumeID)
			if err != nil {
				t.Fatal(err)
			}
			for k, want := range tt.wantTags {
				if val, ok := got.Tags[k]; val != want || ok != (want != "") {
					t.Errorf("tag %s = %q (present %v), want %q", k, val, ok, want)
				}
			}
		})
	}
}
