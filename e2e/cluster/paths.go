package cluster

import (
	"path/filepath"

	"github.com/stowage-csi/stowage/e2e/rig"
)

// CacheDirEnv overrides where built control-plane binaries are cached (default: <repo root>/.cache).
const CacheDirEnv = "STOWAGE_CACHE_DIR"

// RepoRoot walks up from dir to the first folder holding go.work: the Stowage repository root.
func RepoRoot(dir string) (string, error) { return rig.RepoRoot(dir) }

// cacheDir resolves the cache directory: the env override if set, else <repo root>/.cache.
func cacheDir(env string, repoRoot string) string {
	if env != "" {
		return env
	}
	return filepath.Join(repoRoot, ".cache")
}
