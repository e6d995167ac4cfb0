package translate

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
)

func TestToCSI(t *testing.T) {
	ebs := &v1.PersistentVolumeSpec{
		PersistentVolumeSource: v1.PersistentVolumeSource{
			AWSElasticBlockStore: &v1.AWSElasticBlockStoreVolumeSource{VolumeID: "aws://us-east-1a/vol-0abc", FSType: "ext4"},
		},
		AccessModes: []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
	}
	csiSpec := &v1.PersistentVolumeSpec{
		PersistentVolumeSource: v1.PersistentVolumeSource{CSI: &v1.CSIPersistentVolumeSource{Driver: "ebs.csi.aws.com", VolumeHandle: "vol-1"}},
	}
	nfs := &v1.PersistentVolumeSpec{
		PersistentVolumeSource: v1.PersistentVolumeSource{NFS: &v1.NFSVolumeSource{Server: "a", Path: "/"}},
	}
	tests := []struct {
		name         string
		driver       string
		spec         *v1.PersistentVolumeSpec
		wantHandle   string
		wantFSType   string
		wantMigrated bool
		wantErr      bool
	}{
		{name: "csi spec passes through", driver: "ebs.csi.aws.com", spec: csiSpec, wantHandle: "vol-1"},
		{name: "in-tree EBS migrates to the EBS driver", driver: "ebs.csi.aws.com", spec: ebs, wantHandle: "vol-0abc", wantFSType: "ext4", wantMigrated: true},
		{name: "in-tree EBS does not migrate to another driver", driver: "other.csi.example.com", spec: ebs, wantErr: true},
		{name: "non-migratable in-tree source is an error", driver: "ebs.csi.aws.com", spec: nfs, wantErr: true},
		{name: "nil spec is an error", driver: "ebs.csi.aws.com", spec: nil, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, migrated, err := New(tc.driver).ToCSI(klog.Background(), "pv1", tc.spec)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if err != nil {
				return
			}
			if migrated != tc.wantMigrated {
				t.Errorf("migrated = %v, want %v", migrated, tc.wantMigrated)
			}
			if got.CSI.VolumeHandle != tc.wantHandle || got.CSI.FSType != tc.wantFSType {
				t.Errorf("got handle %q fsType %q, want %q %q", got.CSI.VolumeHandle, got.CSI.FSType, tc.wantHandle, tc.wantFSType)
			}
		})
	}
}

func TestRepairVolumeHandleKeepsEBSHandles(t *testing.T) {
	got, err := New("ebs.csi.aws.com").RepairVolumeHandle("vol-0abc", "i-123")
	if err != nil || got != "vol-0abc" {
		t.Fatalf("RepairVolumeHandle = %q, %v; want vol-0abc", got, err)
	}
}
