package mountproto

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"
)

// maxFuzzBody keeps a fuzzed message inside the socket's buffer, so the test can write all of it before the
// decoder reads and needs no second goroutine.
const maxFuzzBody = 16 << 10

// leakProbe is a pipe whose write end is what the messages carry: once every copy of the write end is
// closed, the read end reports EOF, so a descriptor the decoder kept open shows as "no EOF".
type leakProbe struct{ r, w int }

func newLeakProbe(t *testing.T) leakProbe {
	t.Helper()
	var p [2]int
	if err := syscall.Pipe2(p[:], syscall.O_CLOEXEC|syscall.O_NONBLOCK); err != nil {
		t.Fatal(err)
	}
	return leakProbe{r: p[0], w: p[1]}
}

// closed closes the test's own write end and reports whether no other copy of it is left open.
func (p leakProbe) closed(t *testing.T) bool {
	t.Helper()
	_ = syscall.Close(p.w)
	defer syscall.Close(p.r)
	n, err := syscall.Read(p.r, make([]byte, 1))
	return n == 0 && err == nil
}

// unixPair returns the decoder's end of a connected stream socket pair and the raw fd of the sender's end.
func unixPair(t *testing.T) (*net.UnixConn, int) {
	t.Helper()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	f := os.NewFile(uintptr(fds[1]), "decoder")
	c, err := net.FileConn(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	return c.(*net.UnixConn), fds[0]
}

// FuzzRead feeds the mounter's decoder any message a process that can reach the comm socket could write:
// any bytes, split in two writes, carrying 0 to 10 descriptors. It must not panic, must accept only a JSON
// message with exactly one descriptor and hand that descriptor over, and must close every descriptor it got
// whether it accepts the message or not.
func FuzzRead(f *testing.F) {
	valid, _ := json.Marshal(Options{BucketName: "b", Args: []string{"--allow-delete", "--region=eu-west-1"}, Env: []string{"AWS_REGION=eu-west-1"}, VolumeID: "v"})
	f.Add(valid, uint16(0), uint8(1))
	f.Add(valid, uint16(10), uint8(1))
	f.Add(valid, uint16(0), uint8(2))
	f.Add(valid, uint16(0), uint8(0))
	f.Add([]byte(`{"bucketName":`), uint16(3), uint8(1))
	f.Add([]byte(`null`), uint16(0), uint8(1))
	f.Add([]byte(`{"bucketName":"b","args":[1]}`), uint16(0), uint8(10))
	f.Add([]byte{}, uint16(0), uint8(1))
	f.Fuzz(func(t *testing.T, body []byte, split uint16, nfds uint8) {
		if len(body) > maxFuzzBody {
			return
		}
		conn, sender := unixPair(t)
		defer conn.Close()
		probe := newLeakProbe(t)
		var oob []byte
		if n := int(nfds % 11); n > 0 {
			fds := make([]int, n)
			for i := range fds {
				fds[i] = probe.w
			}
			oob = syscall.UnixRights(fds...)
		}
		at := min(int(split), len(body))
		if at > 0 {
			if err := syscall.Sendmsg(sender, body[:at], nil, nil, 0); err != nil {
				t.Fatal(err)
			}
		}
		if err := syscall.Sendmsg(sender, body[at:], oob, nil, 0); err != nil {
			t.Fatal(err)
		}
		_ = syscall.Close(sender)

		opts, err := read(conn)
		if err == nil {
			if !json.Valid(body) {
				t.Fatalf("accepted %q, which is not JSON", body)
			}
			var st syscall.Stat_t
			var want syscall.Stat_t
			if syscall.Fstat(opts.Fd, &st) != nil || syscall.Fstat(probe.w, &want) != nil || st.Ino != want.Ino {
				t.Fatalf("accepted %q with descriptor %d, which is not the one sent", body, opts.Fd)
			}
			_ = syscall.Close(opts.Fd)
		}
		if !probe.closed(t) {
			t.Fatalf("read(%q with %d descriptors) = %v: a received descriptor is still open", body, nfds%11, err)
		}
	})
}

// FuzzSendRecv sends the node's message through the real socket to the mounter's decoder: everything the
// node puts in it arrives unchanged with the descriptor. Strings that are not UTF-8 are skipped: they come
// from CSI requests and files the node reads into Go strings through protobuf, which refuses them.
func FuzzSendRecv(f *testing.F) {
	f.Add("bucket", "--allow-delete", "AWS_REGION=eu-west-1", "pv-1")
	f.Add("my.bucket", "--prefix=team/pvc-1/", "AWS_WEB_IDENTITY_TOKEN_FILE=/credentials/token", "")
	f.Add("b", "--bind=a\x00b", "K=\"quoted\" \\ <tag> &", "v")
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, bucket, arg, env, volumeID string) {
		for _, s := range []string{bucket, arg, env, volumeID} {
			if !utf8.ValidString(s) {
				return
			}
		}
		sock := filepath.Join(dir, SocketName)
		_ = os.Remove(sock)
		l, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		probe := newLeakProbe(t)
		want := Options{Fd: probe.w, BucketName: bucket, Args: []string{arg}, Env: []string{env}, VolumeID: volumeID}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		sent := make(chan error, 1)
		go func() { sent <- Send(ctx, sock, want) }()
		conn, err := l.AcceptUnix()
		if err != nil {
			t.Fatal(err)
		}
		got, err := read(conn)
		conn.Close()
		if serr := <-sent; serr != nil || err != nil {
			t.Fatalf("Send, read %+v: %v", want, errors.Join(serr, err))
		}
		fd := got.Fd
		got.Fd = want.Fd
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("sent %+v, received %+v", want, got)
		}
		_ = syscall.Close(fd)
		if !probe.closed(t) {
			t.Fatal("a copy of the sent descriptor is still open")
		}
	})
}
