package images

import (
	"archive/tar"
	"bufio"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// CheckImage reads the image ref back from the docker-archive at file and verifies it against want, as a
// runtime would see it: the configuration (entrypoint, command, environment, user, working directory,
// platform); every COPY destination a regular executable file; every symlink with its target; the program
// the container starts; each installed package's files; the user in /etc/passwd; /tmp. Every difference is
// reported, not just the first.
func CheckImage(file, ref string, want *Spec) error {
	tag, err := name.NewTag(ref)
	if err != nil {
		return fmt.Errorf("reference %q: %w", ref, err)
	}
	img, err := tarball.ImageFromPath(file, &tag)
	if err != nil {
		return fmt.Errorf("read %s from %s: %w", ref, file, err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return fmt.Errorf("read %s's configuration from %s: %w", ref, file, err)
	}
	fsys, err := readLayers(img)
	if err != nil {
		return fmt.Errorf("read %s's layers from %s: %w", ref, file, err)
	}
	c := &checker{fs: fsys}
	c.config(cf, want)
	for _, cp := range want.Copies {
		c.executable("COPY destination "+cp.Dst, cp.Dst)
	}
	for _, l := range want.Links {
		c.link(l)
	}
	c.start(cf.Config)
	for _, pkg := range want.Packages {
		c.pkg(pkg)
	}
	if want.Base != BaseScratch {
		c.user(cf.Config.User)
		if n := c.lookup("/tmp"); n == nil || n.typ != tar.TypeDir || n.mode&0o1777 != 0o1777 {
			c.fail("/tmp is not a directory with mode 1777")
		}
	}
	if len(c.problems) > 0 {
		return fmt.Errorf("image %s in %s differs from stage %s: %s", ref, file, want.Name, strings.Join(c.problems, "; "))
	}
	return nil
}

type checker struct {
	fs       stack
	problems []string
}

func (c *checker) fail(format string, args ...any) {
	c.problems = append(c.problems, fmt.Sprintf(format, args...))
}

// lookup returns what p is after every symlink is followed, or nil.
func (c *checker) lookup(p string) *node {
	real, err := c.fs.resolve(p, 0)
	if err != nil {
		return nil
	}
	return c.fs.get(real)
}

func (c *checker) config(cf *v1.ConfigFile, want *Spec) {
	if cf.OS != "linux" || cf.Architecture != "amd64" {
		c.fail("platform %s/%s, want linux/amd64", cf.OS, cf.Architecture)
	}
	got := cf.Config
	for _, f := range []struct {
		what      string
		got, want []string
	}{
		{"entrypoint", got.Entrypoint, want.Entrypoint},
		{"cmd", got.Cmd, want.Cmd},
		{"env", got.Env, want.Env},
	} {
		if !slices.Equal(f.got, f.want) {
			c.fail("%s %q, want %q", f.what, f.got, f.want)
		}
	}
	if got.User != want.User {
		c.fail("user %q, want %q", got.User, want.User)
	}
	if got.WorkingDir != want.WorkingDir {
		c.fail("working directory %q, want %q", got.WorkingDir, want.WorkingDir)
	}
}

func (c *checker) executable(what, p string) {
	n := c.lookup(p)
	switch {
	case n == nil:
		c.fail("%s: missing", what)
	case n.typ != tar.TypeReg:
		c.fail("%s: a %s, not a file", what, typeName(n.typ))
	case n.mode&0o111 == 0:
		c.fail("%s: not executable (%s)", what, fileMode(n))
	}
}

func (c *checker) link(l Link) {
	real, err := c.fs.resolveParent(l.Path)
	if err != nil {
		c.fail("symlink %s: %v", l.Path, err)
		return
	}
	n := c.fs.get(real)
	switch {
	case n == nil:
		c.fail("symlink %s: missing", l.Path)
	case n.typ != tar.TypeSymlink:
		c.fail("symlink %s: a %s", l.Path, typeName(n.typ))
	case n.target != l.Target:
		c.fail("symlink %s -> %s, want -> %s", l.Path, n.target, l.Target)
	default:
		if t := c.lookup(l.Path); t == nil || t.typ != tar.TypeReg {
			c.fail("symlink %s -> %s: dangling", l.Path, l.Target)
		}
	}
}

// start checks that the program the container starts (the entrypoint's, else the command's first word) is
// an executable of the image, found on the image's PATH when not absolute.
func (c *checker) start(cfg v1.Config) {
	argv := append(slices.Clone(cfg.Entrypoint), cfg.Cmd...)
	if len(argv) == 0 {
		c.fail("no entrypoint and no cmd")
		return
	}
	prog := argv[0]
	if path.IsAbs(prog) {
		c.executable("program "+prog, prog)
		return
	}
	for _, kv := range cfg.Env {
		if p, ok := strings.CutPrefix(kv, "PATH="); ok {
			for _, d := range strings.Split(p, ":") {
				if n := c.lookup(path.Join(d, prog)); n != nil && n.typ == tar.TypeReg && n.mode&0o111 != 0 {
					return
				}
			}
		}
	}
	c.fail("program %s: not found on the image's PATH", prog)
}

func (c *checker) pkg(pkg string) {
	for _, t := range packageFiles[pkg] {
		if path.IsAbs(t.name) {
			if n := c.lookup(t.name); n == nil || n.typ != tar.TypeReg {
				c.fail("package %s: %s missing", pkg, t.name)
			}
			continue
		}
		found := slices.ContainsFunc(sbinDirs, func(d string) bool { return c.lookup(path.Join(d, t.name)) != nil })
		if !found && !t.optional {
			c.fail("package %s: %s missing", pkg, t.name)
		} else if found {
			for _, d := range sbinDirs {
				if c.lookup(path.Join(d, t.name)) != nil {
					c.executable("package "+pkg+": "+t.name, path.Join(d, t.name))
					break
				}
			}
		}
	}
}

// user checks that the configured user (name or uid) has an account in /etc/passwd.
func (c *checker) user(u string) {
	id, _, _ := strings.Cut(u, ":")
	if id == "" {
		id = "0"
	}
	n := c.lookup("/etc/passwd")
	if n == nil || n.typ != tar.TypeReg {
		c.fail("/etc/passwd missing")
		return
	}
	sc := bufio.NewScanner(strings.NewReader(string(n.data)))
	for sc.Scan() {
		f := strings.Split(sc.Text(), ":")
		if len(f) >= 3 && (f[0] == id || f[2] == id) {
			if _, err := strconv.Atoi(f[2]); err == nil {
				return
			}
		}
	}
	c.fail("user %s: no account in /etc/passwd", u)
}

// readLayers reads every layer of img into a stack, keeping the content of small files (/etc/passwd) only.
func readLayers(img v1.Image) (stack, error) {
	layers, err := img.Layers()
	if err != nil {
		return nil, err
	}
	var s stack
	for i, l := range layers {
		t, err := readLayer(l)
		if err != nil {
			return nil, fmt.Errorf("layer %d: %w", i, err)
		}
		s = append(s, t)
	}
	return s, nil
}

func readLayer(l v1.Layer) (tree, error) {
	rc, err := l.Uncompressed()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	t := tree{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return t, nil
		}
		if err != nil {
			return nil, err
		}
		p := path.Clean("/" + h.Name)
		if strings.HasPrefix(path.Base(p), ".wh.") {
			return nil, fmt.Errorf("%s: whiteouts are not expected in an assembled image", h.Name)
		}
		n := &node{typ: h.Typeflag, mode: h.Mode, uid: h.Uid, gid: h.Gid, target: h.Linkname, size: h.Size}
		if n.typ == tar.TypeReg && h.Size <= 64<<10 {
			if n.data, err = io.ReadAll(tr); err != nil {
				return nil, err
			}
		}
		t[p] = n
	}
}
