package cluster

import (
	"github.com/stowage-csi/stowage/e2e/rig"
	"github.com/stowage-csi/stowage/e2e/tools"
)

// CacheDirEnv overrides where built control-plane binaries are cached (default: <repo root>/.cache).
const CacheDirEnv = tools.CacheDirEnv

// RepoRoot walks up from dir to the first folder holding go.work: the Stowage repository root.
func RepoRoot(dir string) (string, error) { return rig.RepoRoot(dir) }
