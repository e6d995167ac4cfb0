//go:build tools

// Package tools pins the CNI plugins the rig's real nodes give their Pods a network with (bridge, loopback,
// host-local IPAM). The rig builds them with GOWORK=off into the git-ignored cache; no Stowage code imports them.
package tools

import (
	_ "github.com/containernetworking/plugins/plugins/ipam/host-local"
	_ "github.com/containernetworking/plugins/plugins/main/bridge"
	_ "github.com/containernetworking/plugins/plugins/main/loopback"
)
