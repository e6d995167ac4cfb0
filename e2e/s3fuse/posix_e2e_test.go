//go:build e2e

package s3fuse

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/stowage-csi/stowage/e2e/rig"
	"github.com/stowage-csi/stowage/e2e/s3server"
)

// posixCase is one file operation through the mount and the errno Mountpoint gives it (0 = works).
type posixCase struct {
	name string
	op   func(dir string) error
	want syscall.Errno
	// check verifies the effect in S3 (or through the mount) after a successful op.
	check func(t *testing.T, dir string)
}

func writeFile(path, content string, flags int) error {
	f, err := os.OpenFile(path, flags, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(content); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// objects checks the effect of operations in the bucket behind the mounts.
type objects struct {
	ctx    context.Context
	srv    *s3server.Server
	bucket string
}

// inS3 checks that key holds want.
func (c objects) inS3(key, want string) func(t *testing.T, dir string) {
	return func(t *testing.T, _ string) {
		got, err := c.srv.GetObject(c.ctx, c.bucket, key)
		if err != nil || string(got) != want {
			t.Errorf("S3 object %s = %q, %v; want %q", key, got, err, want)
		}
	}
}

// notInS3 checks that key does not exist.
func (c objects) notInS3(key string) func(t *testing.T, dir string) {
	return func(t *testing.T, _ string) {
		if _, err := c.srv.GetObject(c.ctx, c.bucket, key); err == nil {
			t.Errorf("S3 object %s exists, want it absent", key)
		}
	}
}

// TestE2EPosixOperations runs a table of POSIX operations through one mount (with --allow-delete and
// --allow-overwrite) and one without those flags, and prints what works and which errno the rest get.
// The cases run in order: later ones use the files earlier ones made.
func TestE2EPosixOperations(t *testing.T) {
	srv := s3server.Start(t)
	ctx := context.Background()
	bucket := newBucket(t, srv)
	for key, body := range map[string]string{"existing.txt": "old content", "dir/inner.txt": "inner", "dir/sub/deep.txt": "deep"} {
		if err := srv.PutObject(ctx, bucket, key, []byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	rw := mountBucket(t, srv, bucket, "--allow-delete", "--allow-overwrite")
	plain := mountBucket(t, srv, bucket)
	c := objects{ctx: ctx, srv: srv, bucket: bucket}
	var report bytes.Buffer
	for _, cases := range [][]posixCase{fileCases(c), directoryCases(c), writeRuleCases(c)} {
		runPosixCases(t, &report, "rw", rw, cases)
	}
	runPosixCases(t, &report, "default", plain, plainMountCases(c))
	t.Logf("POSIX operations through s3-fuse:\n%s", report.String())
}

// fileCases create, read and list files.
func fileCases(c objects) []posixCase {
	return []posixCase{
		{name: "create and write a new file", want: 0,
			op: func(d string) error {
				return writeFile(filepath.Join(d, "new.txt"), "hello", os.O_CREATE|os.O_WRONLY|os.O_EXCL)
			},
			check: c.inS3("new.txt", "hello")},
		{name: "read it back", want: 0, op: func(d string) error {
			b, err := os.ReadFile(filepath.Join(d, "new.txt"))
			if err == nil && string(b) != "hello" {
				return fmt.Errorf("read %q", b)
			}
			return err
		}},
		{name: "stat reports size", want: 0, op: func(d string) error {
			st, err := os.Stat(filepath.Join(d, "existing.txt"))
			if err == nil && st.Size() != int64(len("old content")) {
				return fmt.Errorf("size %d", st.Size())
			}
			return err
		}},
		{name: "shell redirection creates a file", want: 0,
			op: func(d string) error {
				return exec.Command("sh", "-c", "echo shell > "+filepath.Join(d, "shell.txt")).Run()
			},
			check: c.inS3("shell.txt", "shell\n")},
		// An empty file is uploaded on release, which the kernel sends after close(2) returns (as with
		// Mountpoint), so the check waits for it.
		{name: "touch creates an empty file", want: 0,
			op: func(d string) error { return exec.Command("touch", filepath.Join(d, "empty.txt")).Run() },
			check: func(t *testing.T, d string) {
				rig.Eventually(t, c.ctx, 10*time.Second, "empty.txt in S3 after touch", func(ctx context.Context) (bool, error) {
					got, err := c.srv.GetObject(ctx, c.bucket, "empty.txt")
					if err != nil {
						return false, err
					}
					if len(got) != 0 {
						return false, fmt.Errorf("empty.txt holds %q", got)
					}
					return true, nil
				})
			}},
		{name: "readdir lists files and directories", want: 0, op: func(d string) error {
			ents, err := os.ReadDir(d)
			if err != nil {
				return err
			}
			var names []string
			for _, e := range ents {
				names = append(names, e.Name())
			}
			sort.Strings(names)
			if got := strings.Join(names, ","); got != "dir,empty.txt,existing.txt,new.txt,shell.txt" {
				return fmt.Errorf("listing %s", got)
			}
			return nil
		}},
		{name: "read a missing file", want: syscall.ENOENT, op: func(d string) error { _, err := os.ReadFile(filepath.Join(d, "missing")); return err }},
	}
}

// directoryCases make and remove directories, and try what S3 has no equivalent for.
func directoryCases(c objects) []posixCase {
	return []posixCase{
		{name: "mkdir is local", want: 0, op: func(d string) error { return os.Mkdir(filepath.Join(d, "local"), 0o755) },
			check: func(t *testing.T, d string) {
				if st, err := os.Stat(filepath.Join(d, "local")); err != nil || !st.IsDir() {
					t.Errorf("local dir not visible: %v", err)
				}
				c.notInS3("local/")(t, d)
			}},
		{name: "a file in a new directory reaches S3", want: 0,
			op: func(d string) error {
				return writeFile(filepath.Join(d, "local", "f.txt"), "in local", os.O_CREATE|os.O_WRONLY)
			},
			check: c.inS3("local/f.txt", "in local")},
		{name: "rmdir of an empty local directory", want: 0, op: func(d string) error {
			if err := os.Mkdir(filepath.Join(d, "gone"), 0o755); err != nil {
				return err
			}
			return os.Remove(filepath.Join(d, "gone"))
		}},
		{name: "rmdir of a directory with objects", want: syscall.ENOTEMPTY, op: func(d string) error { return syscall.Rmdir(filepath.Join(d, "dir")) }},
		{name: "rename a file", want: syscall.ENOSYS, op: func(d string) error { return os.Rename(filepath.Join(d, "new.txt"), filepath.Join(d, "renamed.txt")) }},
		{name: "rename a directory", want: syscall.ENOSYS, op: func(d string) error { return os.Rename(filepath.Join(d, "dir"), filepath.Join(d, "dir2")) }},
		// s3-fuse answers ENOSYS like Mountpoint; Linux turns ENOSYS from FUSE_LINK into EPERM.
		{name: "hard link", want: syscall.EPERM, op: func(d string) error { return os.Link(filepath.Join(d, "new.txt"), filepath.Join(d, "hard")) }},
		{name: "symlink", want: syscall.ENOSYS, op: func(d string) error { return os.Symlink("new.txt", filepath.Join(d, "sym")) }},
	}
}

// writeRuleCases check Mountpoint's rules for writes, metadata changes and deletes (with
// --allow-overwrite and --allow-delete).
func writeRuleCases(c objects) []posixCase {
	return []posixCase{
		{name: "append to an existing file", want: syscall.EPERM,
			op: func(d string) error {
				return writeFile(filepath.Join(d, "existing.txt"), "more", os.O_WRONLY|os.O_APPEND)
			}},
		{name: "open an existing file for writing without O_TRUNC", want: syscall.EPERM,
			op: func(d string) error { return writeFile(filepath.Join(d, "existing.txt"), "x", os.O_WRONLY) }},
		{name: "overwrite with O_TRUNC and --allow-overwrite", want: 0,
			op: func(d string) error {
				return writeFile(filepath.Join(d, "existing.txt"), "new content", os.O_WRONLY|os.O_TRUNC)
			},
			check: c.inS3("existing.txt", "new content")},
		{name: "random write", want: syscall.EINVAL, op: func(d string) error {
			f, err := os.OpenFile(filepath.Join(d, "random.bin"), os.O_CREATE|os.O_WRONLY, 0o644)
			if err != nil {
				return err
			}
			defer f.Close()
			if _, err := f.Write([]byte("start")); err != nil {
				return err
			}
			_, err = f.WriteAt([]byte("x"), 4096)
			return err
		}, check: func(t *testing.T, d string) { c.notInS3("random.bin")(t, d) }},
		{name: "read a file while it is being written", want: syscall.EPERM, op: func(d string) error {
			f, err := os.OpenFile(filepath.Join(d, "busy.txt"), os.O_CREATE|os.O_WRONLY, 0o644)
			if err != nil {
				return err
			}
			defer f.Close()
			if _, err := f.Write([]byte("partial")); err != nil {
				return err
			}
			_, err = os.ReadFile(filepath.Join(d, "busy.txt"))
			return err
		}},
		{name: "chmod", want: syscall.EPERM, op: func(d string) error { return os.Chmod(filepath.Join(d, "new.txt"), 0o600) }},
		{name: "chown", want: syscall.EPERM, op: func(d string) error { return os.Chown(filepath.Join(d, "new.txt"), 1, 1) }},
		{name: "set times of an uploaded file", want: syscall.EPERM, op: func(d string) error {
			now := time.Now()
			return os.Chtimes(filepath.Join(d, "new.txt"), now, now)
		}},
		{name: "truncate an uploaded file", want: syscall.EPERM, op: func(d string) error { return os.Truncate(filepath.Join(d, "new.txt"), 1) }},
		{name: "setxattr", want: syscall.EOPNOTSUPP, op: func(d string) error {
			return unix.Setxattr(filepath.Join(d, "new.txt"), "user.k", []byte("v"), 0)
		}},
		{name: "statfs", want: 0, op: func(d string) error {
			var st unix.Statfs_t
			if err := unix.Statfs(d, &st); err != nil {
				return err
			}
			if st.Bavail == 0 {
				return fmt.Errorf("no free blocks reported")
			}
			return nil
		}},
		{name: "unlink with --allow-delete", want: 0, op: func(d string) error { return os.Remove(filepath.Join(d, "shell.txt")) },
			check: func(t *testing.T, d string) {
				c.notInS3("shell.txt")(t, d)
				if _, err := os.Stat(filepath.Join(d, "shell.txt")); !os.IsNotExist(err) {
					t.Errorf("deleted file still visible: %v", err)
				}
			}},
		{name: "unlink a missing file", want: syscall.ENOENT, op: func(d string) error { return os.Remove(filepath.Join(d, "missing")) }},
	}
}

// plainMountCases check what a mount without --allow-delete and --allow-overwrite refuses.
func plainMountCases(c objects) []posixCase {
	return []posixCase{
		{name: "unlink without --allow-delete", want: syscall.EPERM, op: func(d string) error { return syscall.Unlink(filepath.Join(d, "new.txt")) },
			check: nil},
		{name: "overwrite without --allow-overwrite", want: syscall.EPERM,
			op: func(d string) error { return writeFile(filepath.Join(d, "new.txt"), "x", os.O_WRONLY|os.O_TRUNC) }},
		{name: "new files still work", want: 0,
			op: func(d string) error {
				return writeFile(filepath.Join(d, "plain.txt"), "plain", os.O_CREATE|os.O_WRONLY)
			},
			check: c.inS3("plain.txt", "plain")},
	}
}

// runPosixCases runs cases in order through m, adding a line per case to report.
func runPosixCases(t *testing.T, report *bytes.Buffer, mountName string, m *mount, cases []posixCase) {
	t.Helper()
	for _, tc := range cases {
		start := time.Now()
		err := tc.op(m.Dir)
		elapsed := time.Since(start)
		got := errnoOf(err)
		result := "ok"
		if got != 0 {
			result = unix.ErrnoName(got)
		}
		fmt.Fprintf(report, "  %-12s %-50s %-10s %v\n", mountName, tc.name, result, elapsed.Round(time.Millisecond))
		if got != tc.want {
			t.Errorf("%s: %s: got %v (%v), want errno %d (%v)", mountName, tc.name, got, err, tc.want, tc.want)
			continue
		}
		if tc.check != nil && got == 0 {
			tc.check(t, m.Dir)
		}
	}
}
