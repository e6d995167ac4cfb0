//go:build e2e

package s3node

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/stowage-csi/stowage/e2e/rig"
)

// Binaries built once by TestMain.
var s3NodeBin, s3FuseBin string

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "s3-node-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	// The Mountpoint Pod's stand-in runs s3-fuse as uid 1000, as the real Pod does.
	if err := os.Chmod(dir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	root, err := rig.RepoRoot(".")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx := context.Background()
	if s3NodeBin, err = rig.BuildCommand(ctx, root, "s3-node", "s3-node", dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if s3FuseBin, err = rig.BuildCommand(ctx, root, "s3-mounter", "s3-fuse", dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}
