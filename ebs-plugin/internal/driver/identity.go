package driver

import (
	"context"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// GetPluginInfo implements csi.IdentityServer.
func (d *Driver) GetPluginInfo(context.Context, *csi.GetPluginInfoRequest) (*csi.GetPluginInfoResponse, error) {
	return &csi.GetPluginInfoResponse{Name: DriverName, VendorVersion: d.opts.Version}, nil
}

// GetPluginCapabilities implements csi.IdentityServer.
func (d *Driver) GetPluginCapabilities(context.Context, *csi.GetPluginCapabilitiesRequest) (*csi.GetPluginCapabilitiesResponse, error) {
	svc := func(t csi.PluginCapability_Service_Type) *csi.PluginCapability {
		return &csi.PluginCapability{Type: &csi.PluginCapability_Service_{Service: &csi.PluginCapability_Service{Type: t}}}
	}
	return &csi.GetPluginCapabilitiesResponse{Capabilities: []*csi.PluginCapability{
		svc(csi.PluginCapability_Service_CONTROLLER_SERVICE),
		svc(csi.PluginCapability_Service_VOLUME_ACCESSIBILITY_CONSTRAINTS),
		{Type: &csi.PluginCapability_VolumeExpansion_{VolumeExpansion: &csi.PluginCapability_VolumeExpansion{
			Type: csi.PluginCapability_VolumeExpansion_ONLINE}}},
	}}, nil
}

// reachabilityChecker is implemented by a Cloud that can check EC2 is reachable and the caller authorized
// (cloud.Cloud.CheckReachable: a DryRun DescribeAvailabilityZones, cached for hours on success).
type reachabilityChecker interface {
	CheckReachable(ctx context.Context) error
}

// Probe implements csi.IdentityServer. In controller and all modes it checks, as upstream does, that EC2 is
// reachable and authorizes the driver (a DryRun call whose success is cached for hours, so the liveness
// probe stays cheap); a failure is returned as Unavailable. Node mode never calls EC2 here.
func (d *Driver) Probe(ctx context.Context, _ *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	if d.controllerEnabled() {
		if rc, ok := d.cloud.(reachabilityChecker); ok {
			if err := rc.CheckReachable(ctx); err != nil {
				return nil, status.Errorf(codes.Unavailable, "EC2 reachability check failed: %v", err)
			}
		}
	}
	return &csi.ProbeResponse{Ready: wrapperspb.Bool(true)}, nil
}
