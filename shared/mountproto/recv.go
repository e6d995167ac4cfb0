package mountproto

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
)

// maxMessage bounds what Recv reads: options are a few KiB at most.
const maxMessage = 1 << 20

// Recv listens on the socket at path, accepts one connection before ctx ends, and reads one message to
// its end. It requires exactly one file descriptor (extra ones are closed). The socket file is removed
// before it returns.
func Recv(ctx context.Context, path string) (Options, error) {
	_ = os.Remove(path) // a socket left by a previous run of this Pod's container
	addr, done, err := shortAddress(path)
	if err != nil {
		return Options{}, err
	}
	defer done()
	var lc net.ListenConfig
	l, err := lc.Listen(ctx, "unix", addr)
	if err != nil {
		return Options{}, fmt.Errorf("listen on %s: %w", path, err)
	}
	ul := l.(*net.UnixListener)
	ul.SetUnlinkOnClose(true)
	defer ul.Close()
	stop := context.AfterFunc(ctx, func() { ul.Close() })
	defer stop()

	conn, err := ul.AcceptUnix()
	if err != nil {
		if ctx.Err() != nil {
			return Options{}, fmt.Errorf("receive mount options on %s: %w", path, context.Cause(ctx))
		}
		return Options{}, fmt.Errorf("accept on %s: %w", path, err)
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetReadDeadline(dl)
	}
	return read(conn)
}

// read reads the message and its descriptors until the sender closes the connection.
func read(conn *net.UnixConn) (Options, error) {
	var body []byte
	var fds []int
	buf := make([]byte, 1024)
	oob := make([]byte, syscall.CmsgSpace(4*8))
	for {
		n, oobn, _, _, err := conn.ReadMsgUnix(buf, oob)
		body = append(body, buf[:n]...)
		if oobn > 0 {
			got, perr := parseRights(oob[:oobn])
			fds = append(fds, got...)
			if perr != nil {
				closeAll(fds)
				return Options{}, perr
			}
		}
		if errors.Is(err, io.EOF) || (err == nil && n == 0 && oobn == 0) {
			break
		}
		if err != nil {
			closeAll(fds)
			return Options{}, fmt.Errorf("read mount options: %w", err)
		}
		if len(body) > maxMessage {
			closeAll(fds)
			return Options{}, fmt.Errorf("read mount options: message larger than %d bytes", maxMessage)
		}
	}
	if len(fds) != 1 {
		closeAll(fds)
		return Options{}, fmt.Errorf("mount options carried %d file descriptors, want exactly 1", len(fds))
	}
	var opts Options
	if err := json.Unmarshal(body, &opts); err != nil {
		closeAll(fds)
		return Options{}, fmt.Errorf("decode mount options: %w", err)
	}
	opts.Fd = fds[0]
	return opts, nil
}

func parseRights(oob []byte) ([]int, error) {
	msgs, err := syscall.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, fmt.Errorf("parse control message: %w", err)
	}
	var fds []int
	for _, m := range msgs {
		got, err := syscall.ParseUnixRights(&m)
		if err != nil {
			continue // not SCM_RIGHTS
		}
		fds = append(fds, got...)
	}
	return fds, nil
}

func closeAll(fds []int) {
	for _, fd := range fds {
		_ = syscall.Close(fd)
	}
}
