package kubeletsim

import (
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
)

// defaultPath is the PATH a container runtime gives a container whose image and spec set none.
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// hostSystemDirs are the host directories a container sees, so dynamically linked tools and the host's
// /etc (resolv.conf, passwd) work; the rest of the host tree stays out of its root. Entries that are
// symlinks on the host (/bin -> usr/bin on merged-/usr systems) become the same symlinks.
var hostSystemDirs = []string{"usr", "lib", "lib32", "lib64", "libx32", "bin", "sbin", "etc"}

// sandboxMount is one bind mount into the container's root.
type sandboxMount struct {
	host, container string
	readOnly, file  bool
}

// sandbox is how one container process is started: the script that builds its root and drops privileges,
// run as the first process of a new mount and PID namespace.
type sandbox struct {
	rootfs  string
	mounts  []sandboxMount
	uid     int64
	gid     int64
	groups  []int64
	workDir string
	env     []string // NAME=value, exactly what the process gets
	argv    []string
}

// script is the shell program that sets the sandbox up and execs the container's command. It runs as root
// in the new namespaces; nothing it mounts is visible on the host (the namespace is made private first).
func (s *sandbox) script() (string, error) {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	r := shellQuote(s.rootfs)
	w("set -eu")
	w("mount --make-rprivate /")
	w("mkdir -p %s && mount --bind %s %s", r, r, r)
	for _, d := range hostSystemDirs {
		host := "/" + d
		fi, err := os.Lstat(host)
		switch {
		case err != nil:
			continue
		case fi.Mode()&os.ModeSymlink != 0:
			target, err := os.Readlink(host)
			if err != nil {
				return "", err
			}
			in := shellQuote(filepath.Join(s.rootfs, d))
			if !s.mountsUnder("/" + d) {
				w("[ -L %s ] || ln -sfn %s %s", in, shellQuote(target), in)
				break
			}
			// The image puts files here (/bin/aws-s3-csi-mounter): a real directory of links to the host's
			// entries, so the file's mount point is made in the rootfs, never in the host's directory.
			if !filepath.IsAbs(target) {
				target = "/" + target
			}
			w("mkdir -p %s && ln -sf -t %s %s/*", in, in, shellQuote(target))
		case fi.IsDir():
			in := shellQuote(filepath.Join(s.rootfs, d))
			// Read-only: a container running as uid 0 (without capabilities) still owns the host's files.
			w("mkdir -p %s && mount --rbind %s %s && mount -o remount,bind,ro %s", in, host, in, in)
		}
	}
	for _, d := range []string{"dev", "sys"} {
		in := shellQuote(filepath.Join(s.rootfs, d))
		w("mkdir -p %s && mount --rbind /%s %s", in, d, in)
	}
	// A proc of the new PID namespace: the container sees its own processes only.
	w("mkdir -p %s && mount -t proc -o nosuid,nodev,noexec proc %s", shellQuote(filepath.Join(s.rootfs, "proc")), shellQuote(filepath.Join(s.rootfs, "proc")))
	w("mkdir -p %s && chmod 1777 %s", shellQuote(filepath.Join(s.rootfs, "tmp")), shellQuote(filepath.Join(s.rootfs, "tmp")))
	// Shallow paths first, so a mount at /a/b lands on top of one at /a.
	mounts := append([]sandboxMount(nil), s.mounts...)
	sort.SliceStable(mounts, func(i, j int) bool {
		return strings.Count(mounts[i].container, "/") < strings.Count(mounts[j].container, "/")
	})
	for _, m := range mounts {
		in := shellQuote(filepath.Join(s.rootfs, m.container))
		if m.file {
			// A link of the farm above is replaced, so that touch cannot follow it to a host file.
			w("mkdir -p %s && { [ ! -L %s ] || rm -f %s; } && touch %s", shellQuote(filepath.Dir(filepath.Join(s.rootfs, m.container))), in, in, in)
		} else {
			w("mkdir -p %s", in)
		}
		w("mount --bind %s %s", shellQuote(m.host), in)
		if m.readOnly {
			w("mount -o remount,bind,ro %s", in)
		}
	}
	// pivot_root, then detach the old root: a namespace that kept it would hold copies of every host mount
	// (other FUSE mounts among them) and keep them alive after the host unmounts them.
	w("cd %s && mkdir -p .oldroot && pivot_root . .oldroot && cd / && umount -l /.oldroot && rmdir /.oldroot", r)
	w("cd %s", shellQuote(s.workDir))
	groups := "--clear-groups"
	if len(s.groups) > 0 {
		g := make([]string, len(s.groups))
		for i, id := range s.groups {
			g[i] = strconv.FormatInt(id, 10)
		}
		groups = "--groups " + strings.Join(g, ",")
	}
	cmd := []string{"exec", "setpriv", "--reuid", strconv.FormatInt(s.uid, 10), "--regid", strconv.FormatInt(s.gid, 10), groups,
		"--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--pdeathsig", "keep", "--", "/usr/bin/env", "-i"}
	for _, e := range s.env {
		cmd = append(cmd, shellQuote(e))
	}
	for _, a := range s.argv {
		cmd = append(cmd, shellQuote(a))
	}
	w("%s", strings.Join(cmd, " "))
	return b.String(), nil
}

// command is the host process of the container. It is the first process of a new PID namespace, so when it
// ends the kernel kills whatever it left behind, as a container runtime's cgroup kill does; and it dies with
// the process that started it (Pdeathsig, kept across setpriv's change of user), so a test binary that
// panics or times out leaves no container behind.
func (s *sandbox) command(log *os.File) (*exec.Cmd, error) {
	script, err := s.script()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.Env = []string{"PATH=" + defaultPath}
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags: syscall.CLONE_NEWNS | syscall.CLONE_NEWPID,
		Pdeathsig:  syscall.SIGKILL,
	}
	return cmd, nil
}

// shellQuote quotes s for sh.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// mountsUnder tells whether a mount of the sandbox goes at or below dir.
func (s *sandbox) mountsUnder(dir string) bool {
	for _, m := range s.mounts {
		if m.container == dir || strings.HasPrefix(m.container, dir+"/") {
			return true
		}
	}
	return false
}

// checkMountPath refuses a mount point inside what the sandbox takes from the host, where its mount point
// would have to be made in a host directory.
func checkMountPath(p string) error {
	if !path.IsAbs(p) {
		return fmt.Errorf("path %q is not absolute", p)
	}
	p = path.Clean(p)
	for _, d := range append([]string{"dev", "sys", "proc"}, hostSystemDirs...) {
		if p == "/" || p == "/"+d {
			return fmt.Errorf("path %q is a system directory of the sandbox", p)
		}
		if fi, err := os.Lstat("/" + d); err == nil && fi.IsDir() && strings.HasPrefix(p, "/"+d+"/") {
			return fmt.Errorf("path %q is inside the host's /%s, which the sandbox shares read-only", p, d)
		}
	}
	return nil
}
