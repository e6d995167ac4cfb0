package params

import (
	"maps"
	"strings"
	"testing"
)

func TestVolumeContext(t *testing.T) {
	tests := []struct {
		name    string
		in      map[string]string
		want    map[string]string
		wantErr string
	}{
		{name: "nothing to pass", in: map[string]string{"type": "gp2"}, want: nil},
		{name: "blockAttachUntilInitialized true", in: map[string]string{"blockAttachUntilInitialized": "true"},
			want: map[string]string{ContextBlockAttachUntilInitialized: "true"}},
		{name: "blockAttachUntilInitialized false", in: map[string]string{"blockAttachUntilInitialized": "false"}, want: nil},
		{name: "with format options", in: map[string]string{"blockattachuntilinitialized": "t", "inodeSize": "512"},
			want: map[string]string{ContextBlockAttachUntilInitialized: "true", ContextInodeSize: "512"}},
		{name: "invalid", in: map[string]string{"blockAttachUntilInitialized": "maybe"}, wantErr: `"blockAttachUntilInitialized"="maybe"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v, err := ParseVolume(tc.in, false)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := v.Context(); !maps.Equal(got, tc.want) || (tc.want == nil && got != nil) {
				t.Errorf("Context() = %#v, want %#v", got, tc.want)
			}
		})
	}
}

// TestParseVolumeForFsTypes: format options are checked against each capability's fsType, upstream's table
// (ext2/ext3: no ext4BigAlloc, ext4ClusterSize, ext4EncryptionSupport; xfs: blockSize and inodeSize only).
func TestParseVolumeForFsTypes(t *testing.T) {
	tests := []struct {
		name    string
		in      map[string]string
		fsTypes []string
		block   bool
		wantFs  string
		wantErr []string
	}{
		{name: "inodeSize applies to xfs", in: map[string]string{"inodeSize": "512"}, fsTypes: []string{"xfs"}, wantFs: "xfs"},
		{name: "blockSize applies to xfs", in: map[string]string{"blockSize": "4096"}, fsTypes: []string{"xfs"}, wantFs: "xfs"},
		{name: "bytesPerInode not for xfs", in: map[string]string{"bytesPerInode": "8192"}, fsTypes: []string{"xfs"},
			wantErr: []string{`"bytesPerInode"`, `"xfs"`}},
		{name: "numberOfInodes not for xfs", in: map[string]string{"numberofinodes": "100"}, fsTypes: []string{"xfs"},
			wantErr: []string{`"numberOfInodes"`, `"xfs"`}},
		{name: "ext4BigAlloc not for xfs", in: map[string]string{"ext4BigAlloc": "true"}, fsTypes: []string{"xfs"},
			wantErr: []string{`"ext4BigAlloc"`, `"xfs"`}},
		{name: "ext4ClusterSize not for ext3", in: map[string]string{"ext4BigAlloc": "true", "ext4ClusterSize": "16384"}, fsTypes: []string{"ext3"},
			wantErr: []string{`"ext4BigAlloc"`, `"ext3"`}},
		{name: "ext4BigAlloc not for ext2", in: map[string]string{"ext4BigAlloc": "true"}, fsTypes: []string{"ext2"},
			wantErr: []string{`"ext4BigAlloc"`, `"ext2"`}},
		{name: "ext4 takes them all", in: map[string]string{"blockSize": "4096", "inodeSize": "256", "bytesPerInode": "8192",
			"numberOfInodes": "100", "ext4BigAlloc": "true", "ext4ClusterSize": "16384"}, fsTypes: []string{"ext4"}, wantFs: "ext4"},
		{name: "ext3 takes inode options", in: map[string]string{"bytesPerInode": "8192", "numberOfInodes": "100"}, fsTypes: []string{"ext3"}, wantFs: "ext3"},
		{name: "capability overrides the class fsType", in: map[string]string{KeyFsType: "xfs", "bytesPerInode": "8192"},
			fsTypes: []string{"ext4"}, wantFs: "ext4"},
		{name: "capability xfs, class ext4", in: map[string]string{KeyFsType: "ext4", "bytesPerInode": "8192"},
			fsTypes: []string{"xfs"}, wantErr: []string{`"bytesPerInode"`, `"xfs"`}},
		{name: "every capability is checked", in: map[string]string{"numberOfInodes": "100"}, fsTypes: []string{"ext4", "xfs"},
			wantErr: []string{`"numberOfInodes"`, `"xfs"`}},
		{name: "no capability fsType: class fsType", in: map[string]string{KeyFsType: "xfs", "numberOfInodes": "100"},
			wantErr: []string{`"numberOfInodes"`, `"xfs"`}},
		{name: "no capability fsType: default ext4", in: map[string]string{"numberOfInodes": "100"}, wantFs: "ext4"},
		{name: "block refuses format options", in: map[string]string{"inodeSize": "256"}, block: true,
			wantErr: []string{`"inodeSize"`, "block volumes"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v, err := ParseVolumeFor(tc.in, tc.block, tc.fsTypes)
			if len(tc.wantErr) > 0 {
				if err == nil {
					t.Fatalf("no error, want %q", tc.wantErr)
				}
				for _, w := range tc.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("err %q does not name %s", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if v.FsType != tc.wantFs {
				t.Errorf("FsType = %q, want %q", v.FsType, tc.wantFs)
			}
		})
	}
}
