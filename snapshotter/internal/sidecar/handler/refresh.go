package handler

import (
	"context"
	"fmt"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
)

// refresh reads the state of a snapshot that exists already (a pre-provisioned content's, or a group
// member's) with ListSnapshots for its ID, and records it in the status. A driver without LIST_SNAPSHOTS
// cannot be asked, and its snapshot is taken to be ready, as upstream does.
func (h *Handler) refresh(ctx context.Context, c *snapv1.VolumeSnapshotContent) (time.Duration, error) {
	handle := snapshotHandle(c)
	o := observed{handle: handle, ready: true, creationTime: h.cfg.now().UnixNano()}
	if h.cfg.ListSnapshots {
		secrets, err := h.listCredentials(ctx, c)
		if err != nil {
			return 0, h.failed(ctx, c, ReasonCheckFailed, "Failed to check and update snapshot content", err)
		}
		snap, err := h.cfg.CSI.GetSnapshot(ctx, &csi.ListSnapshotsRequest{SnapshotId: handle, Secrets: secrets})
		if err != nil {
			return 0, h.failed(ctx, c, ReasonCheckFailed, "Failed to check and update snapshot content",
				fmt.Errorf("ListSnapshots for snapshot_id %s: %w", handle, err))
		}
		o = snapshotStatus(snap, h.cfg.now())
		o.handle = handle
	}
	if _, err := h.writeStatus(ctx, c, o); err != nil {
		return 0, err
	}
	klog.FromContext(ctx).V(4).Info("Snapshot status refreshed", "snapshotHandle", handle, "readyToUse", o.ready)
	if !o.ready {
		return h.cfg.PollInterval, nil
	}
	return 0, nil
}

// listCredentials are the secrets for ListSnapshots: the class's snapshotter-list secret (templated with the
// content's name only, as upstream), or for a group member, which has no class, the recorded secret.
func (h *Handler) listCredentials(ctx context.Context, c *snapv1.VolumeSnapshotContent) (map[string]string, error) {
	var ref *corev1.SecretReference
	var err error
	if name := className(c); name != "" {
		class, err := h.cfg.ClassLister.Get(name)
		if err != nil {
			return nil, fmt.Errorf("volumesnapshotcontent %s: spec.volumeSnapshotClassName: %w", c.Name, err)
		}
		if ref, err = classSecretRef(snapshotterListSecret, class.Parameters, c, false); err != nil {
			return nil, err
		}
	} else if c.Status != nil && c.Status.VolumeGroupSnapshotHandle != nil {
		if ref, err = annotationSecretRef(c); err != nil {
			return nil, err
		}
	}
	return h.credentials(ctx, ref)
}
