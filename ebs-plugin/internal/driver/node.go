package driver

import (
	"context"

	"github.com/container-storage-interface/spec/lib/go/csi"

	"github.com/stowage-csi/stowage/ebs-plugin/internal/params"
)

// Mounter is the host work the node service needs; *mounter.Mounter implements it.
type Mounter interface {
	FormatAndMountSensitiveWithFormatOptions(source, target, fstype string, options, sensitiveOptions, formatOptions []string) error
	Mount(source, target, fstype string, options []string) error
	Unmount(target string) error
	IsMountPoint(path string) (bool, error)
	CleanupMountPoint(path string) error
	DeviceForMount(path string) (string, int, error)
	FindDevice(devicePath, volumeID string) (string, error)
	VerifyDevice(device, volumeID string) error
	FormatArgs(fsType string, f params.FormatOptions) []string
	DeviceSize(device string) (int64, error)
	Resize(device, mountPath string) error
	DevicePresent(path string) (bool, error)
}

var nodeCapabilities = []csi.NodeServiceCapability_RPC_Type{
	csi.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME,
	csi.NodeServiceCapability_RPC_EXPAND_VOLUME,
	csi.NodeServiceCapability_RPC_GET_VOLUME_STATS,
	csi.NodeServiceCapability_RPC_GET_VOLUME_HEALTH,
}

// NodeGetCapabilities implements csi.NodeServer.
func (d *Driver) NodeGetCapabilities(context.Context, *csi.NodeGetCapabilitiesRequest) (*csi.NodeGetCapabilitiesResponse, error) {
	return &csi.NodeGetCapabilitiesResponse{Capabilities: each(nodeCapabilities, func(c csi.NodeServiceCapability_RPC_Type) *csi.NodeServiceCapability {
		return &csi.NodeServiceCapability{Type: &csi.NodeServiceCapability_Rpc{Rpc: &csi.NodeServiceCapability_RPC{Type: c}}}
	})}, nil
}
