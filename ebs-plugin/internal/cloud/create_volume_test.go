package cloud

import (
	"context"
	"net/url"
	"testing"
)

func TestCreateDiskCreatesOrCopies(t *testing.T) {
	tests := []struct {
		name       string
		opts       DiskOptions
		wantAction string
		wantForm   map[string]string
		notAction  string
	}{
		{
			name:       "empty volume",
			opts:       DiskOptions{CapacityBytes: 3 << 30, VolumeType: "gp3", AvailabilityZone: "us-east-1a", Encrypted: true, Throughput: 200},
			wantAction: "CreateVolume", notAction: "CopyVolumes",
			wantForm: map[string]string{"Size": "3", "VolumeType": "gp3", "AvailabilityZone": "us-east-1a", "Encrypted": "true",
				"Throughput": "200", "ClientToken": sha("pvc-1"), "TagSpecification.1.Tag.1.Value": "pvc-1"},
		},
		{
			name:       "restore from a snapshot",
			opts:       DiskOptions{CapacityBytes: 1 << 30, VolumeType: "gp3", AvailabilityZone: "us-east-1a", SnapshotID: "snap-1", VolumeInitializationRate: 300},
			wantAction: "CreateVolume", notAction: "CopyVolumes",
			wantForm: map[string]string{"SnapshotId": "snap-1", "VolumeInitializationRate": "300"},
		},
		{
			name:       "clone",
			opts:       DiskOptions{CapacityBytes: 2 << 30, VolumeType: "gp3", AvailabilityZone: "us-east-1a", SourceVolumeID: "vol-src", Throughput: 250},
			wantAction: "CopyVolumes", notAction: "CreateVolume",
			wantForm: map[string]string{"SourceVolumeId": "vol-src", "Size": "2", "VolumeType": "gp3", "Throughput": "250",
				"ClientToken": sha("pvc-1"), "TagSpecification.1.Tag.1.Value": "pvc-1"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, h, _ := newTestCloud(t, false, map[string]func(url.Values) (string, string, string){
				"CreateVolume": func(url.Values) (string, string, string) { return "<volumeId>vol-new</volumeId>", "", "" },
				"CopyVolumes": func(url.Values) (string, string, string) {
					return "<volumeSet><item><volumeId>vol-new</volumeId></item></volumeSet>", "", ""
				},
				"DescribeVolumes": describeFrom(map[string]string{"vol-new": volumeXML("vol-new", "available", 2, "")}),
			})
			d, err := c.CreateDisk(context.Background(), "pvc-1", tc.opts)
			if err != nil || d.VolumeID != "vol-new" {
				t.Fatalf("CreateDisk = %+v, %v", d, err)
			}
			if n := h.count(tc.wantAction); n != 1 {
				t.Fatalf("%s calls = %d, want 1", tc.wantAction, n)
			}
			if n := h.count(tc.notAction); n != 0 {
				t.Fatalf("%s calls = %d, want 0", tc.notAction, n)
			}
			form := h.call(tc.wantAction, 0)
			for k, want := range tc.wantForm {
				if got := form.Get(k); got != want {
					t.Errorf("%s %s = %q, want %q", tc.wantAction, k, got, want)
				}
			}
		})
	}
}
