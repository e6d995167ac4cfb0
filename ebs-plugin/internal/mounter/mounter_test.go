package mounter

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/stowage-csi/stowage/ebs-plugin/internal/params"
)

func TestFormatArgs(t *testing.T) {
	tests := []struct {
		name   string
		fs     string
		f      params.FormatOptions
		legacy bool
		want   []string
	}{
		{name: "ext4 all options", fs: "ext4", f: params.FormatOptions{BlockSize: "4096", InodeSize: "512", BytesPerInode: "16384", NumberOfInodes: "1000", Ext4BigAlloc: true, Ext4ClusterSize: "65536", Ext4EncryptionSupport: true},
			want: []string{"-b", "4096", "-I", "512", "-i", "16384", "-N", "1000", "-O", "bigalloc", "-C", "65536", "-O", "encrypt"}},
		{name: "xfs sizes", fs: "xfs", f: params.FormatOptions{BlockSize: "4096", InodeSize: "512"}, want: []string{"-b", "size=4096", "-i", "size=512"}},
		{name: "legacy xfs", fs: "xfs", legacy: true, want: []string{"-m", "bigtime=0,inobtcount=0,reflink=0", "-i", "nrext64=0"}},
		{name: "legacy flag leaves ext4 alone", fs: "ext4", legacy: true, want: nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := &Mounter{LegacyXFS: tc.legacy}
			if got := m.FormatArgs(tc.fs, tc.f); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestCheckSerial(t *testing.T) {
	tests := []struct {
		out     string
		wantErr bool
	}{
		{out: "vol0123456789abcdef0\n"},
		{out: "vol0123456789abcdef0_1\n"},
		{out: "\n"}, // loop devices have no serial
		{out: "vol0fffffffffffffff0\n", wantErr: true},
	}
	for _, tc := range tests {
		if err := checkSerial(tc.out, "vol-0123456789abcdef0"); (err != nil) != tc.wantErr {
			t.Errorf("%q: err = %v", tc.out, err)
		}
	}
}

func TestFindDevice(t *testing.T) {
	dir := t.TempDir()
	m := &Mounter{LinkDir: dir}
	if _, err := m.FindDevice("/nonexistent/xvdaa", "vol-1"); err == nil || !os.IsNotExist(err) && !strings.Contains(err.Error(), "no block device") {
		t.Fatalf("missing device: %v", err)
	}
	// A link that leads outside /dev is refused.
	target := filepath.Join(dir, "file")
	if err := os.WriteFile(target, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, filepath.Join(dir, NVMeLink("vol-2"))); err != nil {
		t.Fatal(err)
	}
	if _, err := m.FindDevice("", "vol-2"); err == nil || !strings.Contains(err.Error(), "outside /dev") {
		t.Fatalf("link outside /dev: %v", err)
	}
	if NVMeLink("vol-0abc") != "nvme-Amazon_Elastic_Block_Store_vol0abc" {
		t.Fatal(NVMeLink("vol-0abc"))
	}
}

func TestParseMountFlags(t *testing.T) {
	tests := []struct {
		in      []string
		want    []string
		wantErr string
	}{
		{in: []string{"noatime", "discard,noatime", " nodiratime "}, want: []string{"noatime", "discard", "nodiratime"}},
		{in: []string{"bind"}, wantErr: "not allowed"},
		{in: []string{"-o"}, wantErr: "must not start"},
		{in: []string{"a b"}, wantErr: "space"},
		{in: []string{"x\x00"}, wantErr: "non-printable"},
		{in: nil, want: nil},
		// The SELinux label the kubelet passes with seLinuxMount: its categories' comma is inside the quotes.
		{in: []string{`noatime,context="system_u:object_r:container_file_t:s0:c12,c34"`, "ro"},
			want: []string{"noatime", `context="system_u:object_r:container_file_t:s0:c12,c34"`, "ro"}},
	}
	for _, tc := range tests {
		got, err := ParseMountFlags(tc.in)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%q: err = %v", tc.in, err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%q: got %q, %v", tc.in, got, err)
		}
	}
}

func FuzzParseMountFlags(f *testing.F) {
	f.Add("noatime,discard")
	f.Add("ro, nouuid")
	f.Add("context=\"system_u:object_r:container_file_t:s0\"")
	f.Add("bind")
	f.Add(`context="system_u:object_r:container_file_t:s0:c1,c2",noatime`)
	f.Fuzz(func(t *testing.T, s string) {
		out, err := ParseMountFlags([]string{s})
		if err != nil {
			return
		}
		seen := map[string]bool{}
		for _, o := range out {
			// A comma may only stand inside double quotes: outside them it separates options.
			if o == "" || strings.ContainsAny(o, " \t\n") || strings.Contains(outsideQuotes(o), ",") || strings.HasPrefix(o, "-") || seen[o] {
				t.Fatalf("accepted bad or duplicate option %q from %q", o, s)
			}
			seen[o] = true
		}
	})
}

func TestDevicePresentLooksUpTheBackingDeviceInSysfs(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "mounted-here")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := unix.Stat(file, &st); err != nil {
		t.Fatal(err)
	}
	sys := filepath.Join(dir, "sys")
	if err := os.Mkdir(sys, 0o700); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		entry   string // created under sys before the check
		path    string
		want    bool
		wantErr bool
	}{
		{name: "device of the filesystem listed", entry: fmt.Sprintf("%d:%d", unix.Major(st.Dev), unix.Minor(st.Dev)), path: file, want: true},
		{name: "device gone from sysfs", path: file, want: false},
		{name: "path gone", path: filepath.Join(dir, "missing"), wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.entry != "" {
				if err := os.Mkdir(filepath.Join(sys, tc.entry), 0o700); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = os.Remove(filepath.Join(sys, tc.entry)) })
			}
			got, err := devicePresent(sys, tc.path)
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Fatalf("devicePresent = %v, %v; want %v (error %v)", got, err, tc.want, tc.wantErr)
			}
		})
	}
}

// outsideQuotes returns s without what stands between double quotes.
func outsideQuotes(s string) string {
	var b strings.Builder
	quoted := false
	for _, r := range s {
		if r == '"' {
			quoted = !quoted
		} else if !quoted {
			b.WriteRune(r)
		}
	}
	return b.String()
}
