package csicontroller

import (
	"context"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/stowage-csi/stowage/shared/s3api"
)

// GetPluginInfo names the driver, the same name s3-node reports, so the csi-provisioner provisions for
// StorageClasses of s3.csi.aws.com.
func (s *Server) GetPluginInfo(context.Context, *csi.GetPluginInfoRequest) (*csi.GetPluginInfoResponse, error) {
	return &csi.GetPluginInfoResponse{Name: s3api.DriverName, VendorVersion: s.opts.Version}, nil
}

// GetPluginCapabilities lists the controller service and no topology: a prefix is reachable from any node.
func (s *Server) GetPluginCapabilities(context.Context, *csi.GetPluginCapabilitiesRequest) (*csi.GetPluginCapabilitiesResponse, error) {
	return &csi.GetPluginCapabilitiesResponse{Capabilities: []*csi.PluginCapability{{
		Type: &csi.PluginCapability_Service_{Service: &csi.PluginCapability_Service{Type: csi.PluginCapability_Service_CONTROLLER_SERVICE}},
	}}}, nil
}

// Probe is ready without asking S3: a slow S3 must not make the csi-provisioner give up on the driver;
// CreateVolume reports S3's errors per volume.
func (s *Server) Probe(context.Context, *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	return &csi.ProbeResponse{Ready: wrapperspb.Bool(true)}, nil
}
