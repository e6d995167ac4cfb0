//go:build bench

package s3fuse

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/stowage-csi/stowage/e2e/rig"
	"github.com/stowage-csi/stowage/e2e/s3server"
	"github.com/stowage-csi/stowage/e2e/tools"
)

// The rclone rows of the tables: rclone mount without its VFS cache (reads stream from S3, writes must be
// sequential) and with the full cache (reads and writes go through a local file, uploaded after close).
const (
	rcloneOff  = "rclone 1.76 cache off"
	rcloneFull = "rclone 1.76 cache full"
)

// isPeer says whether a row is one of the FUSE peers s3-fuse is measured against.
func isPeer(name string) bool {
	return name == "s3fs 1.90" || name == rcloneOff || name == rcloneFull
}

// ensurePeers installs s3fs from Debian when it is missing. rclone is built from the pinned module
// (e2e/tools/rclone): Debian's is years older than the release a user would install.
func ensurePeers(t *testing.T) {
	if _, err := exec.LookPath("s3fs"); err == nil {
		return
	}
	for _, args := range [][]string{{"update", "-qq"}, {"install", "-y", "-qq", "s3fs"}} {
		cmd := exec.Command("apt-get", args...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("apt-get %v: %v\n%s", args, err, out)
		}
	}
}

// peerProcess runs a FUSE client in the foreground and waits for its mount; cleanup unmounts it and
// reaps the process.
func peerProcess(t *testing.T, cmd *exec.Cmd, dir string) int {
	c := startClient(t, cmd)
	t.Cleanup(func() {
		_ = unmount(dir)
		c.reap(30 * time.Second)
	})
	c.waitMounted(t, dir, nil)
	return cmd.Process.Pid
}

func mountS3fs(t *testing.T, srv *s3server.Server, bucket string) (string, int) {
	dir := t.TempDir()
	pw := filepath.Join(t.TempDir(), "passwd")
	if err := os.WriteFile(pw, []byte(srv.AccessKey+":"+srv.SecretKey), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("s3fs", bucket, dir, "-f", "-o",
		"url="+srv.Endpoint+",use_path_request_style,passwd_file="+pw+",endpoint="+s3server.Region)
	cmd.Env = srv.Env()
	return dir, peerProcess(t, cmd, dir)
}

// mountRclone mounts the bucket with rclone mount at its defaults but for the VFS cache mode ("off" or
// "full") and, with the cache, a write-back delay of 0: a file is uploaded as soon as it is closed rather
// than 5 s later, so the write figure (timed until the object is in S3) measures the upload, not a timer.
// Each mount caches in a new directory, so no earlier mount's cache serves it.
func mountRclone(t *testing.T, srv *s3server.Server, bucket, cacheMode string) (string, int) {
	bin, err := tools.Binary(context.Background(), tools.Rclone(), "rclone")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	args := []string{"mount", "vgw:" + bucket, dir, "--vfs-cache-mode", cacheMode, "--cache-dir", t.TempDir()}
	if cacheMode != "off" {
		args = append(args, "--vfs-write-back", "0s")
	}
	cmd := exec.Command(bin, args...)
	// Env() drops every AWS_* variable: rclone takes the endpoint and keys from its own config variables.
	cmd.Env = append(srv.Env(), "RCLONE_CONFIG_VGW_TYPE=s3", "RCLONE_CONFIG_VGW_PROVIDER=Other",
		"RCLONE_CONFIG_VGW_ENDPOINT="+srv.Endpoint, "RCLONE_CONFIG_VGW_ACCESS_KEY_ID="+srv.AccessKey,
		"RCLONE_CONFIG_VGW_SECRET_ACCESS_KEY="+srv.SecretKey, "RCLONE_CONFIG_VGW_REGION="+s3server.Region,
		"RCLONE_CONFIG="+filepath.Join(t.TempDir(), "rclone.conf"))
	return dir, peerProcess(t, cmd, dir)
}

// waitStored polls until key is in the bucket with size bytes. A FUSE client that uploads after close
// returns (rclone with its cache) has not written the file until then, so its write is timed to here;
// for a client whose close uploads, the first HEAD finds it.
func waitStored(t *testing.T, client *s3.Client, bucket, key string, size int64) {
	t.Helper()
	rig.Eventually(t, context.Background(), 5*time.Minute, key+" in the bucket", func(ctx context.Context) (bool, error) {
		out, err := client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &bucket, Key: &key})
		if err != nil {
			return false, err
		}
		return aws.ToInt64(out.ContentLength) == size, nil
	})
}

// waitListed polls until prefix holds n objects, as waitStored for many small files.
func waitListed(t *testing.T, client *s3.Client, bucket, prefix string, n int) {
	t.Helper()
	rig.Eventually(t, context.Background(), 5*time.Minute, fmt.Sprintf("%d objects under %s", n, prefix), func(ctx context.Context) (bool, error) {
		seen := 0
		p := s3.NewListObjectsV2Paginator(client, &s3.ListObjectsV2Input{Bucket: &bucket, Prefix: &prefix})
		for p.HasMorePages() {
			page, err := p.NextPage(ctx)
			if err != nil {
				return false, err
			}
			seen += len(page.Contents)
		}
		return seen == n, nil
	})
}
