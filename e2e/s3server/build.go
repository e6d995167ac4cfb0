// Package s3server runs a real S3 server for tests and benchmarks: versitygw (Apache-2.0), built from
// the Go module proxy into the repository's git-ignored cache and started on loopback with its posix
// backend in a temporary directory and a generated access key.
package s3server

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/stowage-csi/stowage/e2e/rig"
)

// Version is the versitygw release pinned in e2e/tools/versitygw/go.mod.
const Version = "v1.8.0"

// CacheDirEnv overrides where built binaries are cached (default <repo root>/.cache).
const CacheDirEnv = "STOWAGE_CACHE_DIR"

// CacheDir returns $STOWAGE_CACHE_DIR, else <repo root>/.cache.
func CacheDir(root string) string {
	if d := os.Getenv(CacheDirEnv); d != "" {
		return d
	}
	return filepath.Join(root, ".cache")
}

// Binary returns the path of the versitygw binary, building it first if the cache lacks it. An flock
// serialises concurrent builds from parallel test binaries.
func Binary(ctx context.Context) (string, error) {
	root, err := rig.RepoRoot(".")
	if err != nil {
		return "", err
	}
	dir := filepath.Join(CacheDir(root), "bin", "versitygw-"+Version)
	bin := filepath.Join(dir, "versitygw")
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	unlock, err := rig.LockFile(ctx, filepath.Join(dir, ".lock"))
	if err != nil {
		return "", err
	}
	defer unlock()
	if _, err := os.Stat(bin); err == nil {
		return bin, nil // built by whoever held the lock
	}
	tmp := bin + ".tmp"
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", tmp, "github.com/versity/versitygw/cmd/versitygw")
	cmd.Dir = filepath.Join(root, "e2e", "tools", "versitygw")
	cmd.Env = append(os.Environ(), "GOWORK=off", "CGO_ENABLED=0")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("build versitygw in %s: %w\n%s", cmd.Dir, err, out)
	}
	if err := os.Rename(tmp, bin); err != nil {
		return "", err
	}
	return bin, nil
}

// cleanEnv drops AWS_* settings (AWS_CA_BUNDLE, profiles) from env so they cannot leak into a child.
func cleanEnv(env []string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, "AWS_") {
			out = append(out, kv)
		}
	}
	return out
}
