package mountproto

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// dialRetry is how often Send retries while the mounter has not started listening yet.
const dialRetry = 5 * time.Millisecond

// Send connects to the socket at path, retrying while it does not exist or refuses connections (the
// mounter is still starting) until ctx ends, and sends opts with its fd in one message. It does not close
// opts.Fd: the caller owns it.
func Send(ctx context.Context, path string, opts Options) error {
	body, err := json.Marshal(opts)
	if err != nil {
		return fmt.Errorf("encode mount options: %w", err)
	}
	addr, done, err := shortAddress(path)
	if err != nil {
		return err
	}
	defer done()

	var d net.Dialer
	for {
		conn, err := d.DialContext(ctx, "unix", addr)
		if err == nil {
			defer conn.Close()
			if dl, ok := ctx.Deadline(); ok {
				_ = conn.SetWriteDeadline(dl)
			}
			n, oobn, err := conn.(*net.UnixConn).WriteMsgUnix(body, syscall.UnixRights(opts.Fd), nil)
			if err != nil {
				return fmt.Errorf("send mount options to %s: %w", path, err)
			}
			if n != len(body) || oobn == 0 {
				return fmt.Errorf("send mount options to %s: short write (%d of %d bytes)", path, n, len(body))
			}
			return nil
		}
		// A deadline that falls inside the dial reports a timeout, a moment before ctx itself ends: the
		// wait below then ends with ctx, as for a socket not there yet.
		if !errors.Is(err, syscall.ENOENT) && !errors.Is(err, syscall.ECONNREFUSED) && !errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("connect to %s: %w", path, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("connect to %s: mounter not listening: %w", path, context.Cause(ctx))
		case <-time.After(dialRetry):
		}
	}
}

// shortAddress returns an address for the socket at path that fits a unix socket address (108 bytes;
// kubelet paths are longer): the path through an open descriptor of its directory, which, unlike
// upstream's change of the working directory, is safe in a process with other goroutines. done closes the
// descriptor; call it once the socket is no longer used.
func shortAddress(path string) (addr string, done func(), err error) {
	dir, err := os.Open(filepath.Dir(path))
	if err != nil {
		return "", nil, fmt.Errorf("open the directory of %s: %w", path, err)
	}
	return fmt.Sprintf("/proc/self/fd/%d/%s", dir.Fd(), filepath.Base(path)), func() { dir.Close() }, nil
}
