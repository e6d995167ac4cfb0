package driver

import (
	"context"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/klog/v2"

	"github.com/stowage-csi/stowage/ebs-plugin/internal/params"
)

// DevicePathKey is the publish context key that tells the node where the volume was attached.
const DevicePathKey = "devicePath"

// publishOp is a ControllerPublish in progress; ControllerUnpublish for the same volume and node cancels it
// and waits for it to end before detaching, so a detach can never race an attach that is still being issued.
type publishOp struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// ControllerPublishVolume implements csi.ControllerServer.
func (d *Driver) ControllerPublishVolume(ctx context.Context, req *csi.ControllerPublishVolumeRequest) (*csi.ControllerPublishVolumeResponse, error) {
	volID, nodeID := req.GetVolumeId(), req.GetNodeId()
	switch {
	case volID == "":
		return nil, status.Error(codes.InvalidArgument, "volume_id is required")
	case nodeID == "":
		return nil, status.Error(codes.InvalidArgument, "node_id is required")
	case req.GetVolumeCapability() == nil:
		return nil, status.Error(codes.InvalidArgument, "volume_capability is required")
	}
	if _, _, err := checkCapabilities([]*csi.VolumeCapability{req.GetVolumeCapability()}); err != nil {
		return nil, err
	}
	if !validVolumeID(volID) {
		return nil, status.Errorf(codes.NotFound, "volume %q does not exist", volID)
	}
	if !validInstanceID(nodeID) {
		return nil, status.Errorf(codes.NotFound, "node %q does not exist", nodeID)
	}
	key := volID + "/" + nodeID
	d.publishMu.Lock()
	if _, busy := d.publishes[key]; busy || d.unpublishing[key] {
		d.publishMu.Unlock()
		return nil, aborted("volume " + volID + " on node " + nodeID)
	}
	opCtx, cancel := context.WithCancel(ctx)
	op := &publishOp{cancel: cancel, done: make(chan struct{})}
	d.publishes[key] = op
	d.publishMu.Unlock()
	defer func() {
		cancel()
		d.publishMu.Lock()
		delete(d.publishes, key)
		d.publishMu.Unlock()
		close(op.done)
	}()

	disk, err := d.cloud.GetDisk(opCtx, volID)
	if err != nil {
		return nil, cloudError(err, "volume %s", volID)
	}
	mode := req.GetVolumeCapability().GetAccessMode().GetMode()
	if mode == csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER && !disk.MultiAttach {
		return nil, status.Errorf(codes.InvalidArgument, "volume %s was not created with multi-attach", volID)
	}
	if !disk.MultiAttach {
		for _, a := range disk.Attachments {
			if a.InstanceID != nodeID && a.State != "detached" {
				return nil, status.Errorf(codes.FailedPrecondition, "volume %s is attached to %s; detach it first", volID, a.InstanceID)
			}
		}
	}
	if req.GetVolumeContext()[params.KeyBlockAttachUntilInitialized] == "true" {
		if err := d.cloud.WaitInitialized(opCtx, volID); err != nil {
			return nil, cloudError(err, "wait for volume %s to initialize", volID)
		}
	}
	device, err := d.cloud.AttachDisk(opCtx, volID, nodeID)
	if err != nil {
		if opCtx.Err() != nil && ctx.Err() == nil {
			return nil, status.Errorf(codes.Aborted, "attach of %s to %s was cancelled by ControllerUnpublishVolume", volID, nodeID)
		}
		// An unknown instance surfaces here as NotFound: AttachDisk describes the instance anyway, so there is
		// no separate existence check costing a second DescribeInstances.
		return nil, cloudError(err, "attach volume %s to node %s", volID, nodeID)
	}
	klog.FromContext(ctx).V(2).Info("Volume attached", "volumeID", volID, "nodeID", nodeID, "device", device)
	return &csi.ControllerPublishVolumeResponse{PublishContext: map[string]string{DevicePathKey: device}}, nil
}

// ControllerUnpublishVolume implements csi.ControllerServer.
func (d *Driver) ControllerUnpublishVolume(ctx context.Context, req *csi.ControllerUnpublishVolumeRequest) (*csi.ControllerUnpublishVolumeResponse, error) {
	volID, nodeID := req.GetVolumeId(), req.GetNodeId()
	if volID == "" {
		return nil, status.Error(codes.InvalidArgument, "volume_id is required")
	}
	if !validVolumeID(volID) {
		return &csi.ControllerUnpublishVolumeResponse{}, nil
	}
	if nodeID == "" {
		// CSI allows an empty node ID: detach from every node.
		disk, err := d.cloud.GetDisk(ctx, volID)
		if err != nil {
			if status.Code(cloudError(err, "")) == codes.NotFound {
				return &csi.ControllerUnpublishVolumeResponse{}, nil
			}
			return nil, cloudError(err, "volume %s", volID)
		}
		for _, a := range disk.Attachments {
			if err := d.unpublishFrom(ctx, volID, a.InstanceID); err != nil {
				return nil, err
			}
		}
		return &csi.ControllerUnpublishVolumeResponse{}, nil
	}
	if !validInstanceID(nodeID) {
		return &csi.ControllerUnpublishVolumeResponse{}, nil
	}
	if err := d.unpublishFrom(ctx, volID, nodeID); err != nil {
		return nil, err
	}
	return &csi.ControllerUnpublishVolumeResponse{}, nil
}

func (d *Driver) unpublishFrom(ctx context.Context, volID, nodeID string) error {
	key := volID + "/" + nodeID
	for {
		d.publishMu.Lock()
		if d.unpublishing[key] {
			d.publishMu.Unlock()
			return aborted("volume " + volID + " on node " + nodeID)
		}
		op, ok := d.publishes[key]
		if !ok {
			// From here until the detach ends, a new ControllerPublish for the pair gets Aborted.
			d.unpublishing[key] = true
			d.publishMu.Unlock()
			break
		}
		d.publishMu.Unlock()
		op.cancel()
		select {
		case <-op.done:
		case <-ctx.Done():
			return status.Errorf(codes.DeadlineExceeded, "waiting for the cancelled attach of %s to %s: %v", volID, nodeID, ctx.Err())
		}
	}
	defer func() {
		d.publishMu.Lock()
		delete(d.unpublishing, key)
		d.publishMu.Unlock()
	}()
	if err := d.cloud.DetachDisk(ctx, volID, nodeID); err != nil {
		return cloudError(err, "detach volume %s from %s", volID, nodeID)
	}
	return nil
}
