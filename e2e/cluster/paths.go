package cluster

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// CacheDirEnv overrides where built control-plane binaries are cached (default: <repo root>/.cache).
const CacheDirEnv = "STOWAGE_CACHE_DIR"

// RepoRoot walks up from dir to the first folder holding go.work: the Stowage repository root.
func RepoRoot(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("resolve %s: %w", dir, err)
	}
	for d := abs; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.work")); err == nil {
			return d, nil
		} else if !errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("look for go.work in %s: %w", d, err)
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no go.work in %s or any parent: run inside the Stowage repository", abs)
		}
	}
}

// cacheDir resolves the cache directory: the env override if set, else <repo root>/.cache.
func cacheDir(env string, repoRoot string) string {
	if env != "" {
		return env
	}
	return filepath.Join(repoRoot, ".cache")
}
