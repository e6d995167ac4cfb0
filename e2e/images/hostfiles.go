package images

import (
	"bufio"
	"bytes"
	"debug/elf"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strings"
)

// libraryDirs is where Debian's dynamic loader finds libraries on amd64 when a binary names no run path (the
// multiarch directories of /etc/ld.so.conf.d, then the loader's built-in defaults).
var libraryDirs = []string{
	"/usr/local/lib/x86_64-linux-gnu", "/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu",
	"/usr/local/lib", "/lib64", "/usr/lib64", "/lib", "/usr/lib",
}

// hostCopier copies files of this host into an image at the same paths: every symlink on the way (Debian's
// merged /usr: /sbin -> usr/sbin; mkfs.ext4 -> mke2fs) and, for an ELF executable, its dynamic loader and
// every shared library it needs, transitively. The host is Debian 12, the release the node-tools stage
// installs from, so what is copied is what apt-get would have installed there.
type hostCopier struct {
	b    *builder
	done map[string]bool
}

func newHostCopier(b *builder) *hostCopier { return &hostCopier{b: b, done: map[string]bool{}} }

// add copies the host's file p (following and reproducing symlinks) with what it needs to run.
func (c *hostCopier) add(p string) error { return c.addDepth(p, 0) }

func (c *hostCopier) addDepth(p string, depth int) error {
	if depth > maxLinks {
		return fmt.Errorf("%s: too many levels of symbolic links", p)
	}
	parts := strings.Split(strings.TrimPrefix(path.Clean(p), "/"), "/")
	cur := "/"
	for i, part := range parts {
		next := path.Join(cur, part)
		fi, err := os.Lstat(next)
		if err != nil {
			return err
		}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			t, err := os.Readlink(next)
			if err != nil {
				return err
			}
			if !c.done[next] {
				c.done[next] = true
				if err := c.b.symlink(next, t); err != nil {
					return err
				}
			}
			if !path.IsAbs(t) {
				t = path.Join(cur, t)
			}
			return c.addDepth(path.Join(append([]string{t}, parts[i+1:]...)...), depth+1)
		case i < len(parts)-1:
			if !fi.IsDir() {
				return fmt.Errorf("%s: %s is not a directory", p, next)
			}
			cur = next
		default:
			if !fi.Mode().IsRegular() {
				return fmt.Errorf("%s: not a regular file (%s)", next, fi.Mode())
			}
			if c.done[next] {
				return nil
			}
			c.done[next] = true
			if err := c.b.hostFile(next, next, tarMode(fi.Mode())); err != nil {
				return err
			}
			return c.addNeeds(next)
		}
	}
	return fmt.Errorf("%q: not a file", p)
}

// tarMode is fi's permission bits as a tar header holds them (mount and umount are setuid on Debian).
func tarMode(m fs.FileMode) int64 {
	mode := int64(m.Perm())
	if m&fs.ModeSetuid != 0 {
		mode |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		mode |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		mode |= 0o1000
	}
	return mode
}

// addNeeds adds what file needs to run: an ELF file's loader and libraries, a script's interpreter.
func (c *hostCopier) addNeeds(file string) error {
	magic, err := readMagic(file)
	if err != nil {
		return err
	}
	switch {
	case bytes.HasPrefix(magic, []byte(elf.ELFMAG)):
		return c.addELFNeeds(file)
	case bytes.HasPrefix(magic, []byte("#!")):
		interp, err := scriptInterpreter(file)
		if err != nil {
			return err
		}
		// The base already provides /bin/sh (busybox): copying the host's (dash) would replace it.
		if real, err := c.b.layers.resolve(interp, 0); err == nil && c.b.layers.get(real) != nil {
			return nil
		}
		return c.add(interp)
	}
	return nil // data (a configuration file, certificates)
}

func readMagic(file string) ([]byte, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	buf := make([]byte, 4)
	n, _ := f.Read(buf)
	return buf[:n], nil
}

func scriptInterpreter(file string) (string, error) {
	f, err := os.Open(file)
	if err != nil {
		return "", err
	}
	defer f.Close()
	line, _ := bufio.NewReader(f).ReadString('\n')
	fields := strings.Fields(strings.TrimPrefix(line, "#!"))
	if len(fields) == 0 || !path.IsAbs(fields[0]) {
		return "", fmt.Errorf("%s: no interpreter on its #! line", file)
	}
	return fields[0], nil
}

func (c *hostCopier) addELFNeeds(file string) error {
	deps, err := elfNeeds(file)
	if err != nil {
		return err
	}
	for _, d := range deps {
		if err := c.add(d); err != nil {
			return fmt.Errorf("%s needs %s: %w", file, d, err)
		}
	}
	return nil
}

// elfNeeds returns the host paths of file's dynamic loader (PT_INTERP) and of each library in its
// DT_NEEDED entries, found as the loader would: DT_RUNPATH (or DT_RPATH), then the default directories.
func elfNeeds(file string) ([]string, error) {
	f, err := elf.Open(file)
	if err != nil {
		return nil, fmt.Errorf("read ELF %s: %w", file, err)
	}
	defer f.Close()
	var out []string
	for _, p := range f.Progs {
		if p.Type != elf.PT_INTERP {
			continue
		}
		buf := make([]byte, p.Filesz)
		if _, err := p.ReadAt(buf, 0); err != nil {
			return nil, fmt.Errorf("read %s's interpreter: %w", file, err)
		}
		out = append(out, strings.TrimRight(string(buf), "\x00"))
	}
	needed, err := f.ImportedLibraries()
	if err != nil {
		return nil, fmt.Errorf("read %s's needed libraries: %w", file, err)
	}
	dirs, err := runPath(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	dirs = append(dirs, libraryDirs...)
	for _, lib := range needed {
		found := ""
		for _, d := range dirs {
			if _, err := os.Stat(path.Join(d, lib)); err == nil {
				found = path.Join(d, lib)
				break
			}
		}
		if found == "" {
			return nil, fmt.Errorf("%s needs %s, found in none of %s", file, lib, strings.Join(dirs, " "))
		}
		out = append(out, found)
	}
	return out, nil
}

func runPath(f *elf.File) ([]string, error) {
	rp, err := f.DynString(elf.DT_RUNPATH)
	if err != nil {
		return nil, err
	}
	if len(rp) == 0 {
		if rp, err = f.DynString(elf.DT_RPATH); err != nil {
			return nil, err
		}
	}
	var dirs []string
	for _, s := range rp {
		for _, d := range strings.Split(s, ":") {
			if strings.Contains(d, "$") {
				// $ORIGIN and friends would need the loader's substitution rules; no Debian tool here uses them.
				return nil, fmt.Errorf("run path %q: substitutions are not supported", s)
			}
			if d != "" {
				dirs = append(dirs, d)
			}
		}
	}
	return dirs, nil
}
