//go:build e2e

package s3fuse

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stowage-csi/stowage/e2e/s3server"
)

// wrongRegion is a region versitygw is not in: it checks the region of every signature and answers one for
// another region with 400 AuthorizationHeaderMalformed naming its own (s3server.Region), as S3 does.
const wrongRegion = "eu-west-3"

// regionEnv is srv's environment with its AWS_REGION replaced by region settings of the test's.
func regionEnv(srv *s3server.Server, settings ...string) []string {
	var env []string
	for _, kv := range srv.Env() {
		if !strings.HasPrefix(kv, "AWS_REGION=") {
			env = append(env, kv)
		}
	}
	return append(env, settings...)
}

// startFuse starts s3-fuse on bucket with env and extra arguments, on a new directory; Cleanup unmounts
// and reaps it.
func startFuse(t *testing.T, srv *s3server.Server, bucket string, env []string, extra ...string) *mount {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command(binary, s3fuseArgs(srv, bucket, dir, extra...)...)
	cmd.Env = env
	m := &mount{Dir: dir, fuseClient: startClient(t, cmd)}
	t.Cleanup(func() { m.stop(t) })
	return m
}

// A region that is wrong but only a hint (here AWS_DEFAULT_REGION, with no AWS_REGION or --region) still
// mounts: the start-up check is redirected to the server's region, which s3-fuse keeps for every later
// request. A region the user named (--region) is not corrected: the mount fails, naming the right one.
func TestE2ES3FuseRegionRedirect(t *testing.T) {
	srv := s3server.Start(t)
	bucket := newBucket(t, srv)
	if err := srv.PutObject(context.Background(), bucket, "dir/hello", []byte("world")); err != nil {
		t.Fatal(err)
	}

	t.Run("a hinted region follows the redirect", func(t *testing.T) {
		m := startFuse(t, srv, bucket, regionEnv(srv, "AWS_DEFAULT_REGION="+wrongRegion), "--allow-overwrite")
		m.waitMounted(t, m.Dir, func() bool { return strings.Contains(m.output.String(), `"serving"`) })
		if out := m.output.String(); !strings.Contains(out, "redirecting") || !strings.Contains(out, `region="`+s3server.Region+`"`) {
			t.Errorf("s3-fuse did not log the redirect to %s:\n%s", s3server.Region, out)
		}
		// Reads, lists and writes after the check all go to the server's region.
		if b, err := os.ReadFile(filepath.Join(m.Dir, "dir", "hello")); err != nil || string(b) != "world" {
			t.Fatalf("read dir/hello: %q, %v", b, err)
		}
		if err := os.WriteFile(filepath.Join(m.Dir, "dir", "new"), []byte("written"), 0o644); err != nil {
			t.Fatalf("write dir/new: %v", err)
		}
		if got, err := srv.GetObject(context.Background(), bucket, "dir/new"); err != nil || string(got) != "written" {
			t.Fatalf("dir/new in the bucket: %q, %v", got, err)
		}
	})

	t.Run("the user's region is not corrected", func(t *testing.T) {
		for name, tc := range map[string]struct {
			env  []string
			args []string
		}{
			"--region":   {env: regionEnv(srv), args: []string{"--region", wrongRegion}},
			"AWS_REGION": {env: regionEnv(srv, "AWS_REGION="+wrongRegion)},
		} {
			t.Run(name, func(t *testing.T) {
				m := startFuse(t, srv, bucket, tc.env, tc.args...)
				if killed := m.reap(mountTimeout); killed {
					t.Fatalf("s3-fuse still running after %s with a wrong region it may not correct:\n%s", mountTimeout, m.output.String())
				}
				want := "bucket " + bucket + " is in region " + s3server.Region + ", not " + wrongRegion
				if code := m.cmd.ProcessState.ExitCode(); code == 0 || !strings.Contains(m.output.String(), want) {
					t.Fatalf("exit %d, output:\n%s\nwant a failure saying %q", code, m.output.String(), want)
				}
				if isMounted(m.Dir) {
					t.Fatalf("%s is mounted", m.Dir)
				}
			})
		}
	})
}
