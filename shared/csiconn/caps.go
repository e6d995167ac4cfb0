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
	caps, err := ask(ctx, c, "GetPluginCapabilities", func(ctx context.Context) ([]*csi.PluginCapability, error) {
		rsp, err := csi.NewIdentityClient(c.conn).GetPluginCapabilities(ctx, &csi.GetPluginCapabilitiesRequest{})
		return rsp.GetCapabilities(), err
	})
	if err != nil {
		return PluginCapabilities{}, err
	}
	pc := PluginCapabilities{
		Services: collect(caps, func(pc *csi.PluginCapability) csi.PluginCapability_Service_Type { return pc.GetService().GetType() }),
		VolumeExpansion: collect(caps, func(pc *csi.PluginCapability) csi.PluginCapability_VolumeExpansion_Type {
			return pc.GetVolumeExpansion().GetType()
		}),
	}
	c.learnt.record(func(id *driverIdentity) { id.plugin = pc })
	return pc, nil
}

// ControllerCapabilities asks the driver's controller service what it supports.
func (c *Conn) ControllerCapabilities(ctx context.Context) (ControllerCapabilities, error) {
	caps, err := rpcCapabilities(ctx, c, "ControllerGetCapabilities",
		func(ctx context.Context) ([]*csi.ControllerServiceCapability, error) {
			rsp, err := csi.NewControllerClient(c.conn).ControllerGetCapabilities(ctx, &csi.ControllerGetCapabilitiesRequest{})
			return rsp.GetCapabilities(), err
		},
		func(cc *csi.ControllerServiceCapability) csi.ControllerServiceCapability_RPC_Type {
			return cc.GetRpc().GetType()
		})
	if err == nil {
		c.learnt.record(func(id *driverIdentity) { id.controller = caps })
	}
	return caps, err
}

// NodeCapabilities asks the driver's node service what it supports.
func (c *Conn) NodeCapabilities(ctx context.Context) (NodeCapabilities, error) {
	return rpcCapabilities(ctx, c, "NodeGetCapabilities",
		func(ctx context.Context) ([]*csi.NodeServiceCapability, error) {
			rsp, err := csi.NewNodeClient(c.conn).NodeGetCapabilities(ctx, &csi.NodeGetCapabilitiesRequest{})
			return rsp.GetCapabilities(), err
		},
		func(nc *csi.NodeServiceCapability) csi.NodeServiceCapability_RPC_Type { return nc.GetRpc().GetType() })
}

// GroupControllerCapabilities asks the driver's group controller service what it supports.
func (c *Conn) GroupControllerCapabilities(ctx context.Context) (GroupControllerCapabilities, error) {
	return rpcCapabilities(ctx, c, "GroupControllerGetCapabilities",
		func(ctx context.Context) ([]*csi.GroupControllerServiceCapability, error) {
			rsp, err := csi.NewGroupControllerClient(c.conn).GroupControllerGetCapabilities(ctx, &csi.GroupControllerGetCapabilitiesRequest{})
			return rsp.GetCapabilities(), err
		},
		func(gc *csi.GroupControllerServiceCapability) csi.GroupControllerServiceCapability_RPC_Type {
			return gc.GetRpc().GetType()
		})
}

// rpcCapabilities asks a service for its capabilities with get and returns the RPC types rpcType reads from them.
func rpcCapabilities[C any, T comparable](ctx context.Context, c *Conn, call string, get func(context.Context) ([]C, error), rpcType func(C) T) (Set[T], error) {
	caps, err := ask(ctx, c, call, get)
	if err != nil {
		return nil, err
	}
	return collect(caps, rpcType), nil
}

// ask makes one of the GetCapabilities calls with get, bounded by the per-call timeout, and names it in its error.
func ask[C any](ctx context.Context, c *Conn, call string, get func(context.Context) ([]C, error)) ([]C, error) {
	ctx, cancel := c.WithTimeout(ctx)
	defer cancel()
	caps, err := get(ctx)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", call, err)
	}
	return caps, nil
}

// collect is the set of the types typ reads from caps. The protobuf getters read a capability of another kind
// (a plugin's volume expansion when collecting its services) or without a type as the zero value, UNKNOWN in
// every CSI capability enum, which is left out.
func collect[C any, T comparable](caps []C, typ func(C) T) Set[T] {
	set := Set[T]{}
	var unknown T
	for _, c := range caps {
		if t := typ(c); t != unknown {
			set[t] = struct{}{}
		}
	}
	return set
}
