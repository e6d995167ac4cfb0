package params

import (
	"maps"
	"slices"
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
		{name: "with format options", in: map[string]string{"blockattachuntilinitialized": "true", "inodeSize": "512"},
			want: map[string]string{ContextBlockAttachUntilInitialized: "true", ContextInodeSize: "512"}},
		// As upstream, only "true" turns a switch on.
		{name: "t is off", in: map[string]string{"blockAttachUntilInitialized": "t", "inodeSize": "512"},
			want: map[string]string{ContextInodeSize: "512"}},
		{name: "invalid format option", in: map[string]string{"inodeSize": "512 -x"}, wantErr: `"inodeSize"="512 -x"`},
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

// TestParseVolumeReadsLikeUpstream: a StorageClass means what it means upstream. Switches are on only for
// "true" (upstream's "True", "1" or "yes" leave a volume unencrypted, and so they do here), with a warning
// naming the key for a value that was most likely meant as on; "" and "false" are off without one. Numbers
// accept "0" for unset, as upstream's users write it.
func TestParseVolumeReadsLikeUpstream(t *testing.T) {
	for _, tc := range []struct {
		value     string
		on, warns bool
	}{
		{"true", true, false}, {"false", false, false}, {"", false, false},
		{"True", false, true}, {"1", false, true}, {"yes", false, true}, {"TRUE", false, true},
	} {
		v, err := ParseVolume(map[string]string{"encrypted": tc.value, "blockExpress": tc.value}, false)
		if err != nil {
			t.Fatalf("encrypted %q: %v", tc.value, err)
		}
		if v.Encrypted != tc.on || v.BlockExpress != tc.on {
			t.Errorf("encrypted %q: Encrypted %v BlockExpress %v, want %v", tc.value, v.Encrypted, v.BlockExpress, tc.on)
		}
		warned := slices.ContainsFunc(v.Warnings, func(w string) bool { return strings.Contains(w, `"encrypted"`) })
		if warned != tc.warns {
			t.Errorf("encrypted %q: warnings %q, want one naming encrypted: %v", tc.value, v.Warnings, tc.warns)
		}
	}
	v, err := ParseVolume(map[string]string{"type": "gp3", "iops": "0", "throughput": "0", "iopsPerGB": "0"}, false)
	if err != nil {
		t.Fatal(err)
	}
	if v.IOPS != 0 || v.Throughput != 0 || v.IOPSPerGB != 0 {
		t.Errorf("zeros read as %d iops, %d throughput, %d iopsPerGB; want unset", v.IOPS, v.Throughput, v.IOPSPerGB)
	}
	m, err := ParseModify(map[string]string{"iops": "0", "throughput": "3000"}, false)
	if err != nil {
		t.Fatal(err)
	}
	if m.IOPS != 0 || m.Throughput != 3000 {
		t.Errorf("modify: %d iops, %d throughput; want 0 and 3000", m.IOPS, m.Throughput)
	}
}
