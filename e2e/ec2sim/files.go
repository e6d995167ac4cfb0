package ec2sim

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// resizeFile creates the file if needed and sets its size; new space is a hole, so volumes cost nothing
// until written.
func resizeFile(path string, size int64) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	if err := f.Truncate(size); err != nil {
		_ = f.Close()
		return fmt.Errorf("truncate %s: %w", path, err)
	}
	return f.Close()
}

func removeFile(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// copySparse copies src to a new dst of the given size, copying only the data extents so holes stay holes.
func copySparse(src, dst string, size int64) (err error) {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	tmp := dst + ".tmp"
	out, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			_ = os.Remove(tmp)
			return
		}
		err = os.Rename(tmp, dst)
	}()
	st, err := in.Stat()
	if err != nil {
		return err
	}
	srcSize := st.Size()
	fd := int(in.Fd())
	var off int64
	for off < srcSize {
		data, err := unix.Seek(fd, off, unix.SEEK_DATA)
		if err != nil {
			if errors.Is(err, unix.ENXIO) {
				break // no data after off
			}
			return fmt.Errorf("seek data in %s: %w", src, err)
		}
		hole, err := unix.Seek(fd, data, unix.SEEK_HOLE)
		if err != nil {
			return fmt.Errorf("seek hole in %s: %w", src, err)
		}
		if _, err := out.Seek(data, io.SeekStart); err != nil {
			return err
		}
		if _, err := io.Copy(out, io.NewSectionReader(in, data, hole-data)); err != nil {
			return fmt.Errorf("copy %s: %w", src, err)
		}
		off = hole
	}
	if err := out.Truncate(max(size, srcSize)); err != nil {
		return err
	}
	return out.Sync()
}

// removeOrphans deletes volume and snapshot files the state does not know: what a crash between writing a
// file and persisting the state leaves behind, and unfinished copies.
func (s *Server) removeOrphans() {
	for _, kind := range []struct {
		dir   string
		known func(id string) bool
	}{
		{"volumes", func(id string) bool { _, ok := s.st.Volumes[id]; return ok }},
		{"snapshots", func(id string) bool { _, ok := s.st.Snapshots[id]; return ok }},
	} {
		dir := filepath.Join(s.dataDir, kind.dir)
		entries, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, e := range entries {
			id, isImage := strings.CutSuffix(e.Name(), ".img")
			if isImage && kind.known(id) {
				continue
			}
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
				s.log.Error(err, "Removing orphaned file", "file", e.Name())
			} else {
				s.log.Info("Removed orphaned file", "file", filepath.Join(dir, e.Name()))
			}
		}
	}
}
