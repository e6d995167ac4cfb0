package driver

import (
	"context"
	"runtime"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/klog/v2"

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
	return &csi.NodeGetInfoResponse{
		NodeId:             inst.InstanceID,
		MaxVolumesPerNode:  volumeLimit(inst, d.opts.VolumeAttachLimit, d.opts.ReservedVolumeAttachments),
		AccessibleTopology: &csi.Topology{Segments: seg},
	}, nil
}

// volumeLimit is how many CSI volumes the node can take: --volume-attach-limit if set; otherwise the
// instance type's attachment limit minus the root volume and other launch-time EBS volumes (or
// --reserved-volume-attachments), minus the extra network interfaces on instances whose limit is shared
// with them: a limit that counts them wrong lets the scheduler place volumes the instance cannot attach,
// and those attaches hang.
func volumeLimit(inst *metadata.Instance, attachLimit int64, reserved int) int64 {
	if attachLimit > 0 {
		return attachLimit
	}
	limit, shared := attachmentLimit(inst.InstanceType)
	if reserved >= 0 {
		limit -= int64(reserved)
	} else {
		extra := inst.EBSMappings
		if extra < 0 {
			extra = 0
		}
		limit -= int64(extra) + 1
	}
	if shared && inst.ENIs > 1 {
		limit -= int64(inst.ENIs - 1)
	}
	if limit < 1 {
		limit = 1
	}
	return limit
}
