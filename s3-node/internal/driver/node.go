package driver

import (
	"context"

	"github.com/container-storage-interface/spec/lib/go/csi"
)

// NodeGetCapabilities lists only VOLUME_MOUNT_GROUP, as upstream: the kubelet hands the workload's
// fsGroup to NodePublishVolume instead of changing the ownership of a bucket's files. No staging, no
// expansion, no stats.
func (d *Driver) NodeGetCapabilities(context.Context, *csi.NodeGetCapabilitiesRequest) (*csi.NodeGetCapabilitiesResponse, error) {
	return &csi.NodeGetCapabilitiesResponse{Capabilities: []*csi.NodeServiceCapability{{
		Type: &csi.NodeServiceCapability_Rpc{Rpc: &csi.NodeServiceCapability_RPC{Type: csi.NodeServiceCapability_RPC_VOLUME_MOUNT_GROUP}},
	}}}, nil
}

// NodeGetInfo returns the node's name; S3 has no topology and no volume limit.
func (d *Driver) NodeGetInfo(context.Context, *csi.NodeGetInfoRequest) (*csi.NodeGetInfoResponse, error) {
	return &csi.NodeGetInfoResponse{NodeId: d.opts.NodeID}, nil
}
