package registrar

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
)

// removeStale removes a socket left at path by a registrar that did not stop cleanly, so the new one can
// listen there. Anything but a socket is left alone and reported: it is not ours to delete.
func removeStale(path string) error {
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("checking the registration socket %s: %w", path, err)
	case fi.Mode()&fs.ModeSocket == 0:
		return fmt.Errorf("registration socket path %s exists and is not a socket (%s)", path, fi.Mode())
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("removing the stale registration socket %s: %w", path, err)
	}
	return nil
}

// listen creates the registration socket, readable and writable by its owner only: only the kubelet (root)
// has any business on it, as with upstream's umask 0077.
func listen(path string) (net.Listener, error) {
	if err := removeStale(path); err != nil {
		return nil, err
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("listening on the registration socket %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		_ = l.Close()
		return nil, fmt.Errorf("restricting the registration socket %s to its owner: %w", path, err)
	}
	return l, nil
}

// socketState says whether path is a socket: nil if it is, fs.ErrNotExist if nothing is there.
func socketState(path string) error {
	fi, err := os.Lstat(path)
	if err != nil {
		return err
	}
	if fi.Mode()&fs.ModeSocket == 0 {
		return fmt.Errorf("%s is not a socket (%s)", path, fi.Mode())
	}
	return nil
}
