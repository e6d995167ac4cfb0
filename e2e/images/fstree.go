package images

import (
	"archive/tar"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"
)

// node is one entry of an image's file system: a directory, a regular file or a symbolic link.
type node struct {
	typ    byte  // tar.TypeDir, tar.TypeReg or tar.TypeSymlink
	mode   int64 // permission bits with setuid/setgid/sticky, as in a tar header
	uid    int
	gid    int
	target string // a symlink's target, as written
	size   int64
	// What a regular file holds, when the tree is being built: a host file to read, or the bytes themselves.
	src    string
	data   []byte
	digest string // sha256 of the content, hex
}

// tree is a file system as a flat map of clean absolute paths ("/" is the root, never stored). A layer is a
// tree; an image's view is its layers laid over each other (lookups go top-down through a stack).
type tree map[string]*node

// stack is an image's layers, bottom first; the last is the one being built or read.
type stack []tree

// get returns the entry at p (no symlink following), searching from the top layer down.
func (s stack) get(p string) *node {
	for i := len(s) - 1; i >= 0; i-- {
		if n, ok := s[i][p]; ok {
			return n
		}
	}
	return nil
}

// maxLinks bounds symlink resolution, as the kernel's ELOOP does.
const maxLinks = 40

// resolveParent returns p with every symlink among its parent directories followed, so an entry written at
// the result is what a runtime sees at p (/bin/sh on a merged-/usr image is /usr/bin/sh).
func (s stack) resolveParent(p string) (string, error) {
	dir, base := path.Split(path.Clean(p))
	d, err := s.resolve(path.Clean(dir), 0)
	if err != nil {
		return "", err
	}
	return path.Join(d, base), nil
}

// resolve follows every symlink in p, including the last element. A missing element ends the walk: the rest
// is appended unresolved, so the caller sees a path that get reports as missing.
func (s stack) resolve(p string, depth int) (string, error) {
	if depth > maxLinks {
		return "", fmt.Errorf("%s: too many levels of symbolic links", p)
	}
	parts := strings.Split(strings.TrimPrefix(path.Clean(p), "/"), "/")
	cur := "/"
	for i, part := range parts {
		if part == "" {
			continue
		}
		next := path.Join(cur, part)
		n := s.get(next)
		if n == nil {
			return path.Join(append([]string{next}, parts[i+1:]...)...), nil
		}
		if n.typ == tar.TypeSymlink {
			t := n.target
			if !path.IsAbs(t) {
				t = path.Join(cur, t)
			}
			return s.resolve(path.Join(append([]string{t}, parts[i+1:]...)...), depth+1)
		}
		cur = next
	}
	return cur, nil
}

// sortedPaths returns t's paths in an order where every directory precedes what it holds.
func (t tree) sortedPaths() []string {
	paths := make([]string, 0, len(t))
	for p := range t {
		paths = append(paths, p)
	}
	// Comparing element by element keeps "/a/b" right after "/a" ("/a-b" would sort between them bytewise).
	sort.Slice(paths, func(i, j int) bool { return lessPath(paths[i], paths[j]) })
	return paths
}

func lessPath(a, b string) bool {
	as, bs := strings.Split(a, "/"), strings.Split(b, "/")
	for i := 0; i < len(as) && i < len(bs); i++ {
		if as[i] != bs[i] {
			return as[i] < bs[i]
		}
	}
	return len(as) < len(bs)
}

// fileMode converts a tar mode to the fs.FileMode bits it means, for messages.
func fileMode(n *node) fs.FileMode {
	m := fs.FileMode(n.mode & 0o777)
	if n.mode&0o1000 != 0 {
		m |= fs.ModeSticky
	}
	return m
}
