package mounter

import (
	"path/filepath"
	"strings"
	"testing"
)

// FuzzParseTarget checks that a target path the kubelet (or anyone calling the node) sends never panics, and
// that what is accepted is one path segment each, which the node uses in file names and object names, and
// is where the path says: ParseTarget of the path rebuilt from them gives them back.
func FuzzParseTarget(f *testing.F) {
	for _, s := range []string{
		"/var/lib/kubelet/pods/0f1e/volumes/kubernetes.io~csi/pv-a/mount",
		"/var/lib/kubelet/pods/0f1e/volumes/kubernetes.io~csi/pv-a/mount/",
		"/var/lib/kubelet/pods/../volumes/kubernetes.io~csi/pv-a/mount",
		"pods/x/volumes/kubernetes.io~csi/./mount",
		"/pods//volumes/kubernetes.io~csi/pv/mount",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, target string) {
		uid, pv, err := ParseTarget(target)
		if err != nil {
			if !strings.Contains(err.Error(), "target path") {
				t.Fatalf("ParseTarget(%q) = %v: the error does not name the target path", target, err)
			}
			return
		}
		for _, seg := range []string{uid, pv} {
			if seg == "" || seg == "." || seg == ".." || strings.Contains(seg, "/") {
				t.Fatalf("ParseTarget(%q) = %q, %q: not one path segment each", target, uid, pv)
			}
		}
		again := filepath.Join("/var/lib/kubelet/pods", uid, "volumes/kubernetes.io~csi", pv, "mount")
		if u2, p2, err := ParseTarget(again); err != nil || u2 != uid || p2 != pv {
			t.Fatalf("ParseTarget(%q) = %q, %q, %v; want %q, %q", again, u2, p2, err, uid, pv)
		}
	})
}
