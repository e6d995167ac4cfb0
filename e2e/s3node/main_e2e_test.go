//go:build e2e

package s3node

import (
	"os"
	"testing"

	"github.com/stowage-csi/stowage/e2e/rig"
)

// Binaries built once by TestMain.
var s3NodeBin, s3FuseBin string

func TestMain(m *testing.M) {
	// The Mountpoint Pod's stand-in runs s3-fuse as uid 1000, as the real Pod does.
	os.Exit(rig.RunWithCommands(m, []rig.Command{{Module: "s3-node", Name: "s3-node"}, {Module: "s3-mounter", Name: "s3-fuse"}},
		&s3NodeBin, &s3FuseBin))
}
