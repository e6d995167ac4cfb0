package mountproto

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// sameFile reports whether two descriptors refer to the same open file (dev and inode).
func sameFile(t *testing.T, a, b int) bool {
	t.Helper()
	var sa, sb syscall.Stat_t
	if err := syscall.Fstat(a, &sa); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Fstat(b, &sb); err != nil {
		t.Fatal(err)
	}
	return sa.Dev == sb.Dev && sa.Ino == sb.Ino
}

// longDir returns a directory whose socket path is longer than a unix socket address may be.
func longDir(t *testing.T) string {
	d := filepath.Join(t.TempDir(), strings.Repeat("p", 60), strings.Repeat("q", 60))
	if err := os.MkdirAll(d, 0o700); err != nil {
		t.Fatal(err)
	}
	return d
}

func TestSendRecvRoundTrip(t *testing.T) {
	for name, dir := range map[string]string{"short path": t.TempDir(), "path over 108 bytes": longDir(t)} {
		t.Run(name, func(t *testing.T) {
			sock := filepath.Join(dir, SocketName)
			f, err := os.Open(os.DevNull)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			want := Options{Fd: int(f.Fd()), BucketName: "b", Args: []string{"--allow-delete", "--region=eu-west-1"},
				Env: []string{"AWS_REGION=eu-west-1"}}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			got := make(chan error, 1)
			var recvd Options
			go func() {
				var err error
				recvd, err = Recv(ctx, sock)
				got <- err
			}()
			// Send starts before the mounter listens, as when the node is quicker than the Pod.
			if err := Send(ctx, sock, want); err != nil {
				t.Fatal(err)
			}
			if err := <-got; err != nil {
				t.Fatal(err)
			}
			defer syscall.Close(recvd.Fd)
			if !sameFile(t, recvd.Fd, want.Fd) {
				t.Fatal("received descriptor is not the sent file")
			}
			if recvd.BucketName != "b" || strings.Join(recvd.Args, " ") != "--allow-delete --region=eu-west-1" ||
				strings.Join(recvd.Env, " ") != "AWS_REGION=eu-west-1" {
				t.Fatalf("received %+v", recvd)
			}
			if _, err := os.Stat(sock); !os.IsNotExist(err) {
				t.Fatalf("socket left behind: %v", err)
			}
		})
	}
}

func TestWireFormatIsUpstreams(t *testing.T) {
	b, _ := json.Marshal(Options{Fd: 7, BucketName: "b", Args: []string{"--a"}, Env: []string{"K=V"}})
	if string(b) != `{"bucketName":"b","args":["--a"],"env":["K=V"]}` {
		t.Fatalf("JSON %s", b)
	}
}

// rawSend sends body with the given descriptors, as a misbehaving peer might.
func rawSend(t *testing.T, sock string, body []byte, fds []int) {
	t.Helper()
	var conn net.Conn
	var err error
	for i := 0; i < 1000; i++ {
		if conn, err = net.Dial("unix", sock); err == nil {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var oob []byte
	if len(fds) > 0 {
		oob = syscall.UnixRights(fds...)
	}
	if _, _, err := conn.(*net.UnixConn).WriteMsgUnix(body, oob, nil); err != nil {
		t.Fatal(err)
	}
}

func TestRecvRefusesBadMessages(t *testing.T) {
	f, _ := os.Open(os.DevNull)
	defer f.Close()
	fd := int(f.Fd())
	for name, tc := range map[string]struct {
		body []byte
		fds  []int
		want string
	}{
		"no descriptor":  {[]byte(`{"bucketName":"b"}`), nil, "0 file descriptors"},
		"two":            {[]byte(`{"bucketName":"b"}`), []int{fd, fd}, "2 file descriptors"},
		"malformed JSON": {[]byte(`{"bucketName":`), []int{fd}, "decode mount options"},
	} {
		t.Run(name, func(t *testing.T) {
			sock := filepath.Join(t.TempDir(), SocketName)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			done := make(chan error, 1)
			go func() { _, err := Recv(ctx, sock); done <- err }()
			rawSend(t, sock, tc.body, tc.fds)
			if err := <-done; err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Recv error %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestRecvAndSendEndWithTheirContext(t *testing.T) {
	sock := filepath.Join(t.TempDir(), SocketName)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := Recv(ctx, sock); err == nil || !strings.Contains(err.Error(), "deadline") {
		t.Fatalf("Recv without a sender: %v", err)
	}
	ctx2, cancel2 := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel2()
	if err := Send(ctx2, sock, Options{Fd: 0}); err == nil || !strings.Contains(err.Error(), "not listening") {
		t.Fatalf("Send without a mounter: %v", err)
	}
}

func TestExited(t *testing.T) {
	dir := t.TempDir()
	if Exited(dir) {
		t.Fatal("exit marker reported before it exists")
	}
	if err := os.WriteFile(filepath.Join(dir, ExitName), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if !Exited(dir) {
		t.Fatal("exit marker not seen")
	}
}
