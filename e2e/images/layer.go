package images

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
)

// builder lays out an image's layers in memory: metadata and where each file's bytes come from, not the
// bytes themselves, so planning an image (and hashing it to find a cached archive) reads each file once.
type builder struct {
	layers stack
}

// newLayer starts a layer; everything added afterwards goes into it.
func (b *builder) newLayer() { b.layers = append(b.layers, tree{}) }

func (b *builder) top() tree { return b.layers[len(b.layers)-1] }

// dir adds a directory at p (parents as 0755 root) with the given mode and owner.
func (b *builder) dir(p string, mode int64, uid, gid int) error {
	real, err := b.prepare(p)
	if err != nil {
		return err
	}
	if n := b.layers.get(real); n != nil && n.typ != tar.TypeDir {
		return fmt.Errorf("directory %s: a %s is there", p, typeName(n.typ))
	}
	b.top()[real] = &node{typ: tar.TypeDir, mode: mode, uid: uid, gid: gid}
	return nil
}

// hostFile adds the host's file src at p, root-owned, with the given mode.
func (b *builder) hostFile(p, src string, mode int64) error {
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", src)
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return fmt.Errorf("read %s: %w", src, err)
	}
	return b.add(p, &node{typ: tar.TypeReg, mode: mode, src: src, size: fi.Size(), digest: hex.EncodeToString(h.Sum(nil))})
}

// dataFile adds a file holding data at p, root-owned.
func (b *builder) dataFile(p string, data []byte, mode int64) error {
	sum := sha256.Sum256(data)
	return b.add(p, &node{typ: tar.TypeReg, mode: mode, data: data, size: int64(len(data)), digest: hex.EncodeToString(sum[:])})
}

// symlink adds a symbolic link at p pointing to target, as written (relative targets stay relative).
func (b *builder) symlink(p, target string) error {
	return b.add(p, &node{typ: tar.TypeSymlink, mode: 0o777, target: target})
}

func (b *builder) add(p string, n *node) error {
	real, err := b.prepare(p)
	if err != nil {
		return err
	}
	if old := b.layers.get(real); old != nil && old.typ == tar.TypeDir {
		return fmt.Errorf("%s %s: a directory is there", typeName(n.typ), p)
	}
	b.top()[real] = n
	return nil
}

// prepare resolves p's parents through the layers' symlinks, as a runtime unpacking the layer would, and
// adds the missing ones as 0755 root directories.
func (b *builder) prepare(p string) (string, error) {
	if !path.IsAbs(p) || path.Clean(p) == "/" {
		return "", fmt.Errorf("%q: want an absolute path below /", p)
	}
	real, err := b.layers.resolveParent(p)
	if err != nil {
		return "", err
	}
	for d := path.Dir(real); d != "/"; d = path.Dir(d) {
		n := b.layers.get(d)
		if n == nil {
			b.top()[d] = &node{typ: tar.TypeDir, mode: 0o755}
			continue
		}
		if n.typ != tar.TypeDir {
			return "", fmt.Errorf("%s: %s is a %s, not a directory", p, d, typeName(n.typ))
		}
	}
	return real, nil
}

func typeName(typ byte) string {
	switch typ {
	case tar.TypeDir:
		return "directory"
	case tar.TypeReg:
		return "file"
	case tar.TypeSymlink:
		return "symlink"
	}
	return fmt.Sprintf("tar type %q", typ)
}

// writeHash writes a line per entry of t (metadata and content digest) to w: the layer's identity for the
// archive cache.
func (t tree) writeHash(w io.Writer) {
	for _, p := range t.sortedPaths() {
		n := t[p]
		fmt.Fprintf(w, "%q %c %o %d:%d %q %d %s\n", p, n.typ, n.mode, n.uid, n.gid, n.target, n.size, n.digest)
	}
}

// writeTarGz writes t as a gzip-compressed tar. Headers carry no time and no names, so the same tree always
// gives the same layer digest; a host file that changed since it was hashed is an error, not a silent
// mismatch between the archive and its cache key.
func (t tree) writeTarGz(w io.Writer) error {
	zw, err := gzip.NewWriterLevel(w, gzip.BestSpeed)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(zw)
	for _, p := range t.sortedPaths() {
		n := t[p]
		hdr := &tar.Header{
			Typeflag: n.typ, Name: strings.TrimPrefix(p, "/"), Mode: n.mode, Uid: n.uid, Gid: n.gid,
			Linkname: n.target, Format: tar.FormatPAX,
		}
		switch n.typ {
		case tar.TypeDir:
			hdr.Name += "/"
		case tar.TypeReg:
			hdr.Size = n.size
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		if n.typ == tar.TypeReg {
			if err := n.copyTo(tw); err != nil {
				return fmt.Errorf("%s: %w", p, err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return zw.Close()
}

func (n *node) copyTo(w io.Writer) error {
	h := sha256.New()
	if n.src == "" {
		h.Write(n.data)
		if _, err := w.Write(n.data); err != nil {
			return err
		}
	} else {
		f, err := os.Open(n.src)
		if err != nil {
			return err
		}
		defer f.Close()
		if _, err := io.CopyN(io.MultiWriter(w, h), f, n.size); err != nil {
			return fmt.Errorf("copy %s: %w", n.src, err)
		}
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != n.digest {
		return fmt.Errorf("%s changed while the image was assembled", n.src)
	}
	return nil
}
