package leaderelection

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLockName(t *testing.T) {
	tests := []struct {
		prefix, driver, want string
	}{
		{"external-attacher-leader-", "ebs.csi.aws.com", "external-attacher-leader-ebs-csi-aws-com"},
		{"", "ebs.csi.aws.com", "ebs-csi-aws-com"},
		{"external-resizer-", "hostpath.csi.k8s.io", "external-resizer-hostpath-csi-k8s-io"},
		{"external-snapshotter-leader-", "s3.csi.aws.com", "external-snapshotter-leader-s3-csi-aws-com"},
		{"", "snapshot-controller-leader", "snapshot-controller-leader"},
		{"", "driver_with/odd:chars", "driver-with-odd-chars"},
		{"", "trailing.", "trailing-X"},
		{"", "Mixed.Case9", "Mixed-Case9"},
	}
	for _, tt := range tests {
		t.Run(tt.prefix+tt.driver, func(t *testing.T) {
			if got := LockName(tt.prefix, tt.driver); got != tt.want {
				t.Errorf("LockName(%q, %q) = %q, want %q", tt.prefix, tt.driver, got, tt.want)
			}
		})
	}
}

func TestResolveNamespace(t *testing.T) {
	dir := t.TempDir()
	saFile := filepath.Join(dir, "namespace")
	if err := os.WriteFile(saFile, []byte("kube-system\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	emptyFile := filepath.Join(dir, "empty")
	if err := os.WriteFile(emptyFile, []byte("  \n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, flag, env, file, want string
	}{
		{"flag wins", "from-flag", "from-env", saFile, "from-flag"},
		{"env next", "", "from-env", saFile, "from-env"},
		{"service account file next", "", "", saFile, "kube-system"},
		{"empty file falls through", "", "", emptyFile, "default"},
		{"missing file falls through", "", "", filepath.Join(dir, "missing"), "default"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("POD_NAMESPACE", tt.env)
			if got := ResolveNamespace(tt.flag, tt.file); got != tt.want {
				t.Errorf("ResolveNamespace() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestDefaultIdentityIsHostnameAndUnique(t *testing.T) {
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	a, err := DefaultIdentity()
	if err != nil {
		t.Fatal(err)
	}
	b, err := DefaultIdentity()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(a, host+"_") {
		t.Errorf("identity %q does not start with the hostname %q", a, host)
	}
	if a == b {
		t.Errorf("two identities are equal: %q", a)
	}
}
