//go:build tools

// Package tools pins containerd v2 (the daemon, its runc shim and ctr), the container runtime of the rig's
// real nodes. The rig builds it with GOWORK=off and CGO_ENABLED=0 into the git-ignored cache (btrfs,
// devmapper and zfs snapshotters drop out without cgo; the nodes use overlayfs); no Stowage code imports it.
package tools

import (
	_ "github.com/containerd/containerd/v2/cmd/containerd"
	_ "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2"
	_ "github.com/containerd/containerd/v2/cmd/ctr"
)
