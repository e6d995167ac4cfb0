package driver

import (
	"context"
	"maps"
	"runtime"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/klog/v2"

	"github.com/stowage-csi/stowage/ebs-plugin/internal/limits"
	"github.com/stowage-csi/stowage/ebs-plugin/internal/metadata"
)

// NodeGetInfo implements csi.NodeServer. Metadata is read on each call (the attach limit depends on what is
// attached outside CSI, which changes), falling back to the last good answer if the source is unreachable.
func (d *Driver) NodeGetInfo(ctx context.Context, _ *csi.NodeGetInfoRequest) (*csi.NodeGetInfoResponse, error) {
	inst, err := d.metadata.Get(ctx)
	d.instMu.Lock()
	if err == nil {
		d.instance = inst
	} else if d.instance != nil {
		klog.FromContext(ctx).Info("Instance metadata unavailable, using the last answer", "err", err.Error())
		inst = d.instance
	}
	d.instMu.Unlock()
	if inst == nil {
		return nil, status.Errorf(codes.Unavailable, "instance metadata: %v", err)
	}
	seg := map[string]string{
		ZoneTopologyKey:          inst.AvailabilityZone,
		WellKnownZoneTopologyKey: inst.AvailabilityZone,
		OSTopologyKey:            runtime.GOOS,
	}
	// On an Outpost (IMDS outpost-arn), the Outpost's keys too, so volumes for this node are created there.
	maps.Copy(seg, outpostSegments(inst.OutpostARN))
	return &csi.NodeGetInfoResponse{
		NodeId:             inst.InstanceID,
		MaxVolumesPerNode:  d.volumeLimit(ctx, inst),
		AccessibleTopology: &csi.Topology{Segments: seg},
	}, nil
}

// volumeLimit is how many CSI volumes the node can take (see limits.Table.MaxVolumes): a limit that counts
// the instance's slots wrong lets the scheduler place volumes the instance cannot attach, and those attaches
// hang.
func (d *Driver) volumeLimit(ctx context.Context, inst *metadata.Instance) int64 {
	logger := klog.FromContext(ctx)
	r := d.attachLimits.MaxVolumes(
		limits.Node{InstanceType: inst.InstanceType, LaunchVolumes: inst.EBSMappings, ENIs: inst.ENIs},
		limits.Settings{AttachLimit: d.opts.VolumeAttachLimit, Reserved: d.opts.ReservedVolumeAttachments})
	switch {
	case r.FromFlag && r.MaxVolumes == 0:
		// Upstream reports 0 too; say what it means, since a user may have meant "no volumes here".
		logger.Info("Reporting max_volumes_per_node 0 from --volume-attach-limit: Kubernetes reads it as no limit")
	case r.FromFlag:
		logger.V(4).Info("Attach limit from --volume-attach-limit", "maxVolumes", r.MaxVolumes)
	default:
		if !r.Listed {
			logger.V(2).Info("Instance type not in the attach-limit table, using the Nitro default", "instanceType", inst.InstanceType)
		}
		logger.V(4).Info("Attach limit computed", "instanceType", inst.InstanceType, "perCard", r.Limit.Attachments,
			"kind", r.Limit.Kind, "ebsCards", r.Limit.EBSCards, "reserved", r.Reserved, "extraENIs", r.ENIs, "maxVolumes", r.MaxVolumes)
	}
	return r.MaxVolumes
}
