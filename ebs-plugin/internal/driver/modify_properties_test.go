package driver

import (
	"context"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/stowage-csi/stowage/ebs-plugin/internal/cloud"
)

// TestModifyVolumeProperties: the sidecar's annotation parameters modify the volume as a
// VolumeAttributesClass would, with the same validation.
func TestModifyVolumeProperties(t *testing.T) {
	for _, tc := range []struct {
		name   string
		volume string
		params map[string]string
		code   codes.Code
		field  string
		want   cloud.ModifyOptions
	}{
		{name: "type and iops", params: map[string]string{"type": "io2", "iops": "4000"}, want: cloud.ModifyOptions{VolumeType: "io2", IOPS: 4000}},
		{name: "throughput and a tag", params: map[string]string{"throughput": "250", "tagSpecification_1": "team=storage"},
			want: cloud.ModifyOptions{Throughput: 250, TagsAdd: map[string]string{"team": "storage"}}},
		{name: "no name", volume: "-", params: map[string]string{"iops": "4000"}, code: codes.InvalidArgument, field: "name"},
		{name: "bad iops", params: map[string]string{"iops": "lots"}, code: codes.InvalidArgument, field: "iops"},
		{name: "unknown key", params: map[string]string{"sizeGiB": "10"}, code: codes.InvalidArgument, field: "sizeGiB"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, fc, _ := newTestDriver(t, Options{})
			v := fc.AddVolume(cloud.Disk{AvailabilityZone: "us-east-1a", CapacityGiB: 100, VolumeType: "gp3", IOPS: 3000, Throughput: 125, State: "available"})
			name := v.VolumeID
			if tc.volume == "-" {
				name = ""
			}
			err := d.ModifyVolumeProperties(context.Background(), name, tc.params, nil)
			if tc.code != codes.OK {
				wantCode(t, err, tc.code, tc.field)
				if len(fc.Modified) != 0 {
					t.Fatalf("modified %+v", fc.Modified)
				}
				return
			}
			if err != nil || len(fc.Modified) != 1 {
				t.Fatalf("err %v, modified %+v", err, fc.Modified)
			}
			m := fc.Modified[0]
			if m.VolumeType != tc.want.VolumeType || m.IOPS != tc.want.IOPS || m.Throughput != tc.want.Throughput || len(m.TagsAdd) != len(tc.want.TagsAdd) ||
				(len(tc.want.TagsAdd) > 0 && m.TagsAdd["team"] != "storage") {
				t.Fatalf("modify options %+v, want %+v", m, tc.want)
			}
		})
	}
}
