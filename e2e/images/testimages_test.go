package images

import (
	"archive/tar"
	"bufio"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestTestImagesBuildPauseAndBusybox builds the real pause and checks both archives, every busybox name,
// the applet links and that pause exits 0 on SIGTERM as the real one does.
func TestTestImagesBuildPauseAndBusybox(t *testing.T) {
	cache := t.TempDir()
	as, err := TestImages(context.Background(), TestOptions{CacheDir: cache, RepoRoot: repoRoot(t)})
	if err != nil {
		t.Fatal(err)
	}
	pause, busybox := archiveNamed(t, as, "pause"), archiveNamed(t, as, "busybox")
	if len(pause.Refs) != 1 || pause.Refs[0] != PauseImage || len(busybox.Refs) != len(BusyboxImages()) {
		t.Errorf("refs: pause %q, busybox %q", pause.Refs, busybox.Refs)
	}
	for _, a := range as {
		if err := a.Check(); err != nil {
			t.Error(err)
		}
	}
	glibc := archiveNamed(t, as, "glibc-dns-testing")
	if len(glibc.Refs) != 1 || glibc.Refs[0] != GlibcImage {
		t.Errorf("refs: glibc-dns-testing %q", glibc.Refs)
	}
	// GNU dd, whose oflag=nocache the multiVolume specs write with, with the libraries it runs on.
	gfs := readArchive(t, glibc)
	for _, f := range []string{"/usr/bin/dd", "/usr/bin/grep", "/usr/bin/sha256sum", "/usr/bin/base64", "/usr/bin/dash", "/bin/head"} {
		if n := gfs.get(f); n == nil {
			t.Errorf("glibc-dns-testing lacks %s", f)
		}
	}
	if n := gfs.get("/bin/sh"); n == nil || n.target != "/usr/bin/dash" {
		t.Errorf("glibc-dns-testing's /bin/sh is %+v, want dash, which runs PATH's dd rather than busybox's", n)
	}
	fsys := readArchive(t, busybox)
	for _, applet := range []string{"ls", "cat", "mount", "sleep", "sh"} {
		if n := fsys.get("/bin/" + applet); n == nil || n.typ != tar.TypeSymlink || n.target != "busybox" {
			t.Errorf("/bin/%s: %+v, want a link to busybox", applet, n)
		}
	}

	bin := cache + "/images/bin/pause"
	if dynamicELF(bin) {
		t.Errorf("%s is dynamically linked", bin)
	}
	cmd := exec.Command(bin)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// pause logs its PID-1 warning once its signal handlers are set: wait for that line, not for a time.
	r := bufio.NewReader(stderr)
	first, err := r.ReadString('\n')
	if !strings.Contains(first, "first process") {
		t.Fatalf("pause's first line %q (%v), want its PID-1 warning", first, err)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	rest, _ := io.ReadAll(r)
	if err := cmd.Wait(); err != nil || !strings.Contains(string(rest), "Shutting down") {
		t.Errorf("pause on SIGTERM: %v, want exit 0 and a shutdown line; stderr: %s", err, rest)
	}
}

// TestAgnhostImage checks the agnhost archive: its upstream name, the binary at /agnhost, agnhost's
// entrypoint and default command, and nsenter, which the storage suites' hostexec Pods run, on the PATH.
func TestAgnhostImage(t *testing.T) {
	cache := t.TempDir()
	bin := filepath.Join(t.TempDir(), "agnhost")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	a, err := Agnhost(context.Background(), cache, bin)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Check(); err != nil {
		t.Error(err)
	}
	if len(a.Refs) != 1 || a.Refs[0] != AgnhostImage {
		t.Errorf("refs %q, want %q", a.Refs, AgnhostImage)
	}
	if got := a.Spec.Entrypoint; len(got) != 1 || got[0] != "/agnhost" || len(a.Spec.Cmd) != 1 || a.Spec.Cmd[0] != "pause" {
		t.Errorf("entrypoint %q cmd %q, want [/agnhost] [pause]", got, a.Spec.Cmd)
	}
	fsys := readArchive(t, a)
	if n := fsys.get("/agnhost"); n == nil || n.typ != tar.TypeReg {
		t.Errorf("/agnhost: %+v, want a file", n)
	}
	if n := fsys.get("/bin/nsenter"); n == nil || n.typ != tar.TypeSymlink || n.target != "busybox" {
		t.Errorf("/bin/nsenter: %+v, want a link to busybox", n)
	}
}
