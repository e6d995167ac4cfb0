package csiconn

import (
	"context"
	"fmt"

	"github.com/container-storage-interface/spec/lib/go/csi"
)

// Set is a set of CSI capabilities.
type Set[T comparable] map[T]struct{}

// Has reports whether the driver announced c.
func (s Set[T]) Has(c T) bool {
	_, ok := s[c]
	return ok
}

// PluginCapabilities are the driver's GetPluginCapabilities answer: services (CONTROLLER_SERVICE,
// VOLUME_ACCESSIBILITY_CONSTRAINTS, GROUP_CONTROLLER_SERVICE) and volume expansion modes (ONLINE, OFFLINE).
type PluginCapabilities struct {
	Services        Set[csi.PluginCapability_Service_Type]
	VolumeExpansion Set[csi.PluginCapability_VolumeExpansion_Type]
}

// Has reports whether the driver announced the plugin service c.
func (p PluginCapabilities) Has(c csi.PluginCapability_Service_Type) bool { return p.Services.Has(c) }

// ControllerCapabilities is the driver's ControllerGetCapabilities answer.
type ControllerCapabilities = Set[csi.ControllerServiceCapability_RPC_Type]

// NodeCapabilities is the driver's NodeGetCapabilities answer.
type NodeCapabilities = Set[csi.NodeServiceCapability_RPC_Type]

// GroupControllerCapabilities is the driver's GroupControllerGetCapabilities answer.
type GroupControllerCapabilities = Set[csi.GroupControllerServiceCapability_RPC_Type]

// PluginCapabilities asks the driver which services it offers.
func (c *Conn) PluginCapabilities(ctx context.Context) (PluginCapabilities, error) {
	ctx, cancel := c.WithTimeout(ctx)
	defer cancel()
	rsp, err := csi.NewIdentityClient(c.conn).GetPluginCapabilities(ctx, &csi.GetPluginCapabilitiesRequest{})
	if err != nil {
		return PluginCapabilities{}, fmt.Errorf("GetPluginCapabilities: %w", err)
	}
	caps := PluginCapabilities{Services: Set[csi.PluginCapability_Service_Type]{}, VolumeExpansion: Set[csi.PluginCapability_VolumeExpansion_Type]{}}
	for _, pc := range rsp.GetCapabilities() {
		if s := pc.GetService(); s != nil {
			caps.Services[s.GetType()] = struct{}{}
		}
		if e := pc.GetVolumeExpansion(); e != nil {
			caps.VolumeExpansion[e.GetType()] = struct{}{}
		}
	}
	return caps, nil
}

// ControllerCapabilities asks the driver's controller service what it supports.
func (c *Conn) ControllerCapabilities(ctx context.Context) (ControllerCapabilities, error) {
	ctx, cancel := c.WithTimeout(ctx)
	defer cancel()
	rsp, err := csi.NewControllerClient(c.conn).ControllerGetCapabilities(ctx, &csi.ControllerGetCapabilitiesRequest{})
	if err != nil {
		return nil, fmt.Errorf("ControllerGetCapabilities: %w", err)
	}
	caps := ControllerCapabilities{}
	for _, cc := range rsp.GetCapabilities() {
		if r := cc.GetRpc(); r != nil {
			caps[r.GetType()] = struct{}{}
		}
	}
	return caps, nil
}

// NodeCapabilities asks the driver's node service what it supports.
func (c *Conn) NodeCapabilities(ctx context.Context) (NodeCapabilities, error) {
	ctx, cancel := c.WithTimeout(ctx)
	defer cancel()
	rsp, err := csi.NewNodeClient(c.conn).NodeGetCapabilities(ctx, &csi.NodeGetCapabilitiesRequest{})
	if err != nil {
		return nil, fmt.Errorf("NodeGetCapabilities: %w", err)
	}
	caps := NodeCapabilities{}
	for _, nc := range rsp.GetCapabilities() {
		if r := nc.GetRpc(); r != nil {
			caps[r.GetType()] = struct{}{}
		}
	}
	return caps, nil
}

// GroupControllerCapabilities asks the driver's group controller service what it supports.
func (c *Conn) GroupControllerCapabilities(ctx context.Context) (GroupControllerCapabilities, error) {
	ctx, cancel := c.WithTimeout(ctx)
	defer cancel()
	rsp, err := csi.NewGroupControllerClient(c.conn).GroupControllerGetCapabilities(ctx, &csi.GroupControllerGetCapabilitiesRequest{})
	if err != nil {
		return nil, fmt.Errorf("GroupControllerGetCapabilities: %w", err)
	}
	caps := GroupControllerCapabilities{}
	for _, gc := range rsp.GetCapabilities() {
		if r := gc.GetRpc(); r != nil {
			caps[r.GetType()] = struct{}{}
		}
	}
	return caps, nil
}
