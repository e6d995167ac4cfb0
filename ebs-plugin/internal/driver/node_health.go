package driver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/klog/v2"
)

// The reasons NodeGetVolumeHealth reports, CamelCase as CSI asks so that COs can match on them. Every one
// comes with status INACCESSIBLE: the node cannot reach the volume's data through the path it was given.
const (
	// HealthPathNotFound: the publish or staging path does not exist.
	HealthPathNotFound = "PathNotFound"
	// HealthPathUnreadable: the path exists but stat fails (for example EIO from a dying filesystem).
	HealthPathUnreadable = "PathUnreadable"
	// HealthNotMounted: the path exists but nothing is mounted there any more.
	HealthNotMounted = "NotMounted"
	// HealthDeviceNotFound: something is mounted, but the block device behind it has left the node.
	HealthDeviceNotFound = "DeviceNotFound"
)

// NodeGetVolumeHealth implements csi.NodeServer (alpha in CSI v1.13, which replaced NodeGetVolumeStats's
// VolumeCondition with this RPC). Each path the CO gives is checked in turn: it exists, it is a mount point
// (a bind mount of the device for raw block volumes), and the block device behind it is still on the node.
// A problem is a health status in the answer, not an error: the call fails only for a bad request, a volume
// the node has never seen, or when the plugin itself cannot look.
//
// It takes no in-flight slot: it only reads, and a probe holding the slot would make the CO's own
// stage/publish retry fail with Aborted; a hung mount is also exactly what it should be able to report.
func (d *Driver) NodeGetVolumeHealth(ctx context.Context, req *csi.NodeGetVolumeHealthRequest) (*csi.NodeGetVolumeHealthResponse, error) {
	volID, publish, staging := req.GetVolumeId(), req.GetVolumePublishPath(), req.GetStagingTargetPath()
	if volID == "" {
		return nil, status.Error(codes.InvalidArgument, "volume_id is required")
	}
	for _, p := range []struct{ field, path string }{{"volume_publish_path", publish}, {"staging_target_path", staging}} {
		if p.path != "" && !filepath.IsAbs(p.path) {
			return nil, status.Errorf(codes.InvalidArgument, "%s %q must be an absolute path", p.field, p.path)
		}
	}
	health := &csi.VolumeHealth{VolumeId: volID}
	if publish == "" && staging == "" {
		// Nothing to look at but the device: a volume without one is not on this node at all.
		if _, err := d.mounter.FindDevice("", volID); err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return nil, status.Errorf(codes.NotFound, "volume_id %s: %v", volID, err)
			}
			return nil, status.Errorf(codes.Internal, "volume_id %s: %v", volID, err)
		}
		return &csi.NodeGetVolumeHealthResponse{VolumeHealth: health}, nil
	}

	checks := []struct{ field, path string }{{"volume_publish_path", publish}}
	// A raw block volume is published as a file and never mounted at the staging path (NodeStageVolume does
	// nothing for it), so its staging path says nothing about its health.
	if !isFileTarget(publish) {
		checks = append(checks, struct{ field, path string }{"staging_target_path", staging})
	}
	var entries []*csi.VolumeHealth_VolumeHealthEntry
	for _, c := range checks {
		if c.path == "" {
			continue
		}
		reason, msg, err := d.pathHealth(c.field, c.path)
		if err != nil {
			return nil, err
		}
		if reason != "" {
			entries = addHealthEntry(entries, reason, msg)
		}
	}
	if len(entries) > 0 {
		klog.FromContext(ctx).V(2).Info("Volume unhealthy", "volumeID", volID, "statuses", entries)
	}
	health.HealthStatuses = entries
	return &csi.NodeGetVolumeHealthResponse{VolumeHealth: health}, nil
}

// pathHealth returns the reason and message of the first problem found at path, or "" when it is a live
// mount of a present device. err is set only when the plugin cannot tell (the mount table is unreadable).
func (d *Driver) pathHealth(field, path string) (reason, msg string, err error) {
	if _, err := os.Stat(path); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return HealthPathNotFound, fmt.Sprintf("%s %s does not exist", field, path), nil
		}
		return HealthPathUnreadable, fmt.Sprintf("%s %s cannot be read: %v", field, path, err), nil
	}
	mounted, err := d.mounter.IsMountPoint(path)
	if err != nil {
		return "", "", status.Errorf(codes.Internal, "check mount of %s %s: %v", field, path, err)
	}
	if !mounted {
		return HealthNotMounted, fmt.Sprintf("%s %s is no longer a mount point", field, path), nil
	}
	present, err := d.mounter.DevicePresent(path)
	if err != nil {
		return "", "", status.Errorf(codes.Internal, "find the device behind %s %s: %v", field, path, err)
	}
	if !present {
		return HealthDeviceNotFound, fmt.Sprintf("the block device mounted at %s %s is no longer on this node", field, path), nil
	}
	return "", "", nil
}

// addHealthEntry appends an INACCESSIBLE entry, folding the message into an existing entry with the same
// reason: CSI forbids two entries with one (status, reason).
func addHealthEntry(entries []*csi.VolumeHealth_VolumeHealthEntry, reason, msg string) []*csi.VolumeHealth_VolumeHealthEntry {
	for _, e := range entries {
		if e.GetReason() == reason {
			e.Message = strings.Join([]string{e.GetMessage(), msg}, "; ")
			return entries
		}
	}
	return append(entries, &csi.VolumeHealth_VolumeHealthEntry{
		Status: csi.VolumeHealthErrorType_INACCESSIBLE, Reason: reason, Message: msg,
	})
}

// isFileTarget reports whether path exists and is not a directory: the target of a raw block publish
// (an empty file, or the device node bound onto it).
func isFileTarget(path string) bool {
	if path == "" {
		return false
	}
	fi, err := os.Stat(path)
	return err == nil && !fi.IsDir()
}
