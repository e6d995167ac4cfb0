package images

import (
	"context"
	"fmt"
	"os/exec"
	"path"
	"slices"
	"strconv"
	"strings"
)

const (
	// caBundle is where Debian's ca-certificates (and distroless) keep every trusted CA in one file; Go's
	// crypto/x509 reads it there, and distroless points SSL_CERT_FILE at it.
	caBundle = "/etc/ssl/certs/ca-certificates.crt"
	// hostBusybox is Debian's busybox-static: /bin/sh of the Debian base and everything of the busybox images.
	hostBusybox = "/usr/bin/busybox"
)

// hostTool is a file a Debian package installs that the node image copies from this host.
type hostTool struct {
	name     string // an executable's name, found in sbinDirs; or an absolute path
	optional bool   // copied if the host has it
}

// sbinDirs is where Debian 12 installs executables (/sbin and /bin are links into /usr).
var sbinDirs = []string{"/usr/sbin", "/usr/bin"}

// packageFiles is what the node image takes from each package the node-tools stage installs: every
// executable the ebs-plugin node service runs (its own exec calls and k8s.io/mount-utils': mount, umount,
// fsck and the fsck.<type> helpers it runs, mkfs.<type>, blkid, lsblk, blockdev, resize2fs, xfs_growfs,
// dumpe2fs, xfs_io), the repair tools an operator reaches for, and the configuration they read (mke2fs
// without /etc/mke2fs.conf formats with different defaults). ebs-plugin's own list is checked against this
// one by a test.
var packageFiles = map[string][]hostTool{
	"ca-certificates": {{name: caBundle}},
	// The test images' (GlibcImage): what the storage suites' Pods run besides the shell.
	"coreutils":  {{name: "dd"}, {name: "base64"}, {name: "sha256sum"}, {name: "sleep"}, {name: "cat"}, {name: "ls"}},
	"grep":       {{name: "grep"}},
	"dash":       {{name: "dash"}},
	"mount":      {{name: "mount"}, {name: "umount"}},
	"util-linux": {{name: "blkid"}, {name: "lsblk"}, {name: "blockdev"}, {name: "fsck"}},
	"e2fsprogs": {
		{name: "mkfs.ext4"}, {name: "mkfs.ext3"}, {name: "mke2fs"}, {name: "e2fsck"}, {name: "fsck.ext4"},
		{name: "fsck.ext3"}, {name: "resize2fs"}, {name: "tune2fs"}, {name: "dumpe2fs"}, {name: "/etc/mke2fs.conf"},
	},
	"xfsprogs": {
		{name: "mkfs.xfs"}, {name: "xfs_growfs"}, {name: "xfs_repair"}, {name: "fsck.xfs"}, {name: "xfs_io", optional: true},
		{name: "xfs_db", optional: true},
	},
}

// hostPath finds t on this host: its absolute path, or the first of sbinDirs holding it.
func (t hostTool) hostPath(exists func(string) bool) (string, bool) {
	if path.IsAbs(t.name) {
		return t.name, exists(t.name)
	}
	for _, d := range sbinDirs {
		if p := path.Join(d, t.name); exists(p) {
			return p, true
		}
	}
	return "", false
}

// user is one line of /etc/passwd and /etc/group (a group of the same name and id).
type user struct {
	name string
	id   int
	home string
}

// baseUsers are the accounts each base ships (distroless: root, nobody, nonroot; Debian's and busybox's
// system accounts the containers here never run as are left out).
func baseUsers(b Base) []user {
	switch b {
	case BaseScratch:
		return nil
	case BaseStatic, BaseNonroot:
		return []user{{"root", 0, "/root"}, {"nobody", 65534, "/nonexistent"}, {"nonroot", 65532, "/home/nonroot"}}
	}
	return []user{{"root", 0, "/root"}, {"nobody", 65534, "/nonexistent"}}
}

// users returns the base's accounts plus one for each numeric USER id the base lacks, so tools that look the
// running user up (and a shell's prompt) find it. A USER naming an account the base lacks is an error: a
// runtime would refuse to start the container.
func (s *Spec) users() ([]user, error) {
	us := baseUsers(s.Base)
	if s.Base == BaseScratch {
		return nil, nil
	}
	name, _, _ := strings.Cut(s.User, ":")
	if name == "" {
		return us, nil
	}
	id, err := strconv.Atoi(name)
	if err != nil {
		if !slices.ContainsFunc(us, func(u user) bool { return u.name == name }) {
			return nil, fmt.Errorf("image %s: USER %s: no such account in the %s base", s.Name, s.User, s.Base)
		}
		return us, nil
	}
	if !slices.ContainsFunc(us, func(u user) bool { return u.id == id }) {
		us = append(us, user{fmt.Sprintf("user%d", id), id, "/"})
	}
	return us, nil
}

func passwd(us []user) []byte {
	var b strings.Builder
	for _, u := range us {
		fmt.Fprintf(&b, "%s:x:%d:%d:%s:%s:/sbin/nologin\n", u.name, u.id, u.id, u.name, u.home)
	}
	return []byte(b.String())
}

func group(us []user) []byte {
	var b strings.Builder
	for _, u := range us {
		fmt.Fprintf(&b, "%s:x:%d:\n", u.name, u.id)
	}
	return []byte(b.String())
}

// addBase lays out the base image's files in b's current layer.
func (s *Spec) addBase(ctx context.Context, b *builder) error {
	if s.Base == BaseScratch {
		return nil
	}
	if s.Base == BaseDebian {
		// Debian 12's merged /usr, so host paths (/sbin/mkfs.ext4, /lib64/ld-linux-x86-64.so.2) mean the same.
		for _, d := range []string{"bin", "sbin", "lib", "lib64"} {
			if err := b.dir("/usr/"+d, 0o755, 0, 0); err != nil {
				return err
			}
			if err := b.symlink("/"+d, "usr/"+d); err != nil {
				return err
			}
		}
	}
	us, err := s.users()
	if err != nil {
		return err
	}
	steps := []func() error{
		func() error { return b.dir("/tmp", 0o1777, 0, 0) },
		func() error { return b.dir("/root", 0o700, 0, 0) },
		func() error { return b.dataFile("/etc/passwd", passwd(us), 0o644) },
		func() error { return b.dataFile("/etc/group", group(us), 0o644) },
		// Go's resolver reads it for the order of /etc/hosts and DNS; distroless ships this line.
		func() error { return b.dataFile("/etc/nsswitch.conf", []byte("hosts: files dns\n"), 0o644) },
	}
	for _, u := range us {
		if strings.HasPrefix(u.home, "/home/") {
			steps = append(steps, func() error { return b.dir(u.home, 0o700, u.id, u.id) })
		}
	}
	switch s.Base {
	case BaseStatic, BaseNonroot:
		steps = append(steps, func() error { return b.hostFile(caBundle, caBundle, 0o644) })
	case BaseDebian:
		steps = append(steps,
			func() error { return b.hostFile(hostBusybox, hostBusybox, 0o755) },
			func() error { return b.symlink("/usr/bin/sh", "busybox") },
			// As Debian's: e2fsprogs reads it to tell whether a device is mounted.
			func() error { return b.symlink("/etc/mtab", "../proc/self/mounts") })
	case BaseBusybox:
		steps = append(steps, func() error { return addBusybox(ctx, b) })
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return fmt.Errorf("image %s: %s base: %w", s.Name, s.Base, err)
		}
	}
	return nil
}

// addBusybox adds busybox as /bin/busybox and a link to it in /bin for each applet it lists.
func addBusybox(ctx context.Context, b *builder) error {
	out, err := exec.CommandContext(ctx, hostBusybox, "--list").Output()
	if err != nil {
		return fmt.Errorf("%s --list (install busybox-static): %w", hostBusybox, err)
	}
	if err := b.hostFile("/bin/busybox", hostBusybox, 0o755); err != nil {
		return err
	}
	applets := strings.Fields(string(out))
	if !slices.Contains(applets, "sh") {
		return fmt.Errorf("%s has no sh applet", hostBusybox)
	}
	for _, a := range applets {
		if a == "busybox" || strings.Contains(a, "/") {
			continue
		}
		if err := b.symlink("/bin/"+a, "busybox"); err != nil {
			return err
		}
	}
	return nil
}

// addPackages copies what each installed package provides from this host, with what it needs to run.
func (s *Spec) addPackages(b *builder, exists func(string) bool) error {
	c := newHostCopier(b)
	for _, pkg := range s.Packages {
		for _, t := range packageFiles[pkg] {
			p, ok := t.hostPath(exists)
			if !ok {
				if t.optional {
					continue
				}
				return fmt.Errorf("image %s: package %s: %s is not on this host (apt-get install %s)", s.Name, pkg, t.name, pkg)
			}
			if err := c.add(p); err != nil {
				return fmt.Errorf("image %s: package %s: %w", s.Name, pkg, err)
			}
		}
	}
	return nil
}
