package kubeletsim

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestSandboxRunsInItsOwnRoot starts a shell in a sandbox as the mounter's user: it has the host's tools and
// its bind mounts, but not the rest of the host tree, no capabilities, and exactly the environment given.
func TestSandboxRunsInItsOwnRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the sandbox needs root")
	}
	for _, tool := range []string{"unshare", "setpriv", "pivot_root"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed", tool)
		}
	}
	dir := t.TempDir()
	vol := filepath.Join(dir, "vol")
	if err := os.MkdirAll(vol, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(vol, 0o777); err != nil {
		t.Fatal(err)
	}
	// A host mount made before the sandbox starts, like another Pod's FUSE mount: the sandbox must hold no
	// copy of it, or the host's unmount would not end it.
	other := filepath.Join(dir, "other")
	if err := os.Mkdir(other, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("kubeletsim-other", other, "tmpfs", 0, ""); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = unix.Unmount(other, unix.MNT_DETACH) }()
	script := filepath.Join(dir, "hello.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho hello from the image\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	sb := &sandbox{
		rootfs: filepath.Join(dir, "rootfs"), uid: 1000, gid: 1000, groups: []int64{3000}, workDir: "/data",
		env:    []string{"PATH=" + defaultPath, "FOO=bar"},
		mounts: []sandboxMount{{host: vol, container: "/data"}, {host: script, container: "/bin/hello", readOnly: true, file: true}},
		argv: []string{"/bin/sh", "-c", `hello; id -u; id -g; id -G; pwd; env | sort | tr '\n' ' '; echo; ` +
			`grep CapEff /proc/self/status; test -e ` + dir + ` && echo host-visible; ls /; echo hi > /data/f; grep -q kubeletsim-other /proc/self/mountinfo && echo host-mount-held; true`},
	}
	logFile, err := os.Create(filepath.Join(dir, "log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	cmd, err := sb.command(logFile)
	if err != nil {
		t.Fatal(err)
	}
	runErr := cmd.Run()
	out, _ := os.ReadFile(filepath.Join(dir, "log"))
	if runErr != nil {
		t.Fatalf("sandbox: %v\n%s", runErr, out)
	}
	got := string(out)
	for _, want := range []string{"hello from the image\n", "1000\n1000\n1000 3000\n/data\n", "CapEff:\t0000000000000000", "FOO=bar PATH=" + defaultPath + " PWD=/data"} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "host-mount-held") {
		t.Errorf("the sandbox's mount namespace holds a copy of the host mount at %s:\n%s", other, got)
	}
	if strings.Contains(got, "host-visible") {
		t.Errorf("the sandbox sees the host's %s:\n%s", dir, got)
	}
	if fi, err := os.Stat(filepath.Join(vol, "f")); err != nil || fi.Sys() == nil {
		t.Errorf("file written in the sandbox is not in the volume: %v", err)
	}
	if left, err := MountsUnder(dir); err != nil || len(left) != 1 || left[0] != other {
		t.Errorf("host mounts under %s: %v, %v; want only %s", dir, left, err, other)
	}
}
