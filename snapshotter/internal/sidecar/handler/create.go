package handler

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	"k8s.io/klog/v2"

	"github.com/stowage-csi/stowage/shared/csiconn"
	"github.com/stowage-csi/stowage/snapshotter/internal/snapapi"
)

// create takes the snapshot of a dynamic content, or asks again for one not ready yet: the being-created
// annotation goes on before CreateSnapshot, so a timeout or a crash leaves "maybe in progress" on the object
// for the next sync (or the next process) to finish; then the status patch, then the annotation comes off.
// Upstream's write sequence, without its GET before the status write.
func (h *Handler) create(ctx context.Context, c *snapv1.VolumeSnapshotContent) (time.Duration, error) {
	logger := klog.FromContext(ctx)
	req, err := h.createRequest(ctx, c)
	if err != nil {
		return 0, h.failed(ctx, c, ReasonCreationFailed, "Failed to create snapshot", err)
	}
	if c, err = h.markBeingCreated(ctx, c); err != nil {
		return 0, err
	}
	logger.V(4).Info("CreateSnapshot", "name", req.Name, "sourceVolumeID", req.SourceVolumeId)
	snap, err := h.cfg.CSI.CreateSnapshot(ctx, req)
	if err != nil {
		cause := fmt.Errorf("CreateSnapshot %q of volume %s: %w", req.Name, req.SourceVolumeId, err)
		if csiconn.IsFinal(err) {
			// The driver answered: nothing is in progress, so nothing can leak.
			removed, rerr := h.removeBeingCreated(ctx, c)
			if rerr != nil {
				return 0, rerr
			}
			c = removed
		}
		return 0, h.failed(ctx, c, ReasonCreationFailed, "Failed to create snapshot", cause)
	}
	c, err = h.writeStatus(ctx, c, snapshotStatus(snap, h.cfg.now()))
	if err != nil {
		return 0, err
	}
	if _, err := h.removeBeingCreated(ctx, c); err != nil {
		return 0, err
	}
	logger.V(2).Info("Snapshot created", "snapshotHandle", snap.GetSnapshotId(), "readyToUse", snap.GetReadyToUse())
	if !snap.GetReadyToUse() {
		return h.cfg.PollInterval, nil
	}
	return 0, nil
}

// createRequest builds the CreateSnapshot request of a dynamic content: the name from the VolumeSnapshot's
// UID, the class's parameters without the csi.storage.k8s.io/ keys (plus the metadata keys with
// --extra-create-metadata), and the snapshotter secret.
func (h *Handler) createRequest(ctx context.Context, c *snapv1.VolumeSnapshotContent) (*csi.CreateSnapshotRequest, error) {
	if c.Spec.Source.VolumeHandle == nil || *c.Spec.Source.VolumeHandle == "" {
		return nil, fmt.Errorf("volumesnapshotcontent %s: spec.source.volumeHandle is empty", c.Name)
	}
	name, err := h.snapshotName(c)
	if err != nil {
		return nil, err
	}
	if c.Spec.VolumeSnapshotClassName == nil || *c.Spec.VolumeSnapshotClassName == "" {
		return nil, fmt.Errorf("volumesnapshotcontent %s: spec.volumeSnapshotClassName is empty; a dynamic snapshot needs a class", c.Name)
	}
	class, err := h.cfg.ClassLister.Get(*c.Spec.VolumeSnapshotClassName)
	if err != nil {
		return nil, fmt.Errorf("volumesnapshotcontent %s: spec.volumeSnapshotClassName: %w", c.Name, err)
	}
	params, err := reservedStripped("volumesnapshotclass", class.Name, class.Parameters)
	if err != nil {
		return nil, err
	}
	if h.cfg.ExtraCreateMetadata {
		params[snapapi.MetaSnapshotName] = c.Spec.VolumeSnapshotRef.Name
		params[snapapi.MetaSnapshotNamespace] = c.Spec.VolumeSnapshotRef.Namespace
		params[snapapi.MetaContentName] = c.Name
	}
	secrets, err := h.snapshotterCredentials(ctx, c, class.Parameters)
	if err != nil {
		return nil, err
	}
	return &csi.CreateSnapshotRequest{SourceVolumeId: *c.Spec.Source.VolumeHandle, Name: name, Parameters: params, Secrets: secrets}, nil
}

// snapshotterCredentials are the snapshotter secret's data: the secret the snapshot controller recorded in
// the content's annotations, else the one the class names (a content made without a snapshot controller).
func (h *Handler) snapshotterCredentials(ctx context.Context, c *snapv1.VolumeSnapshotContent, classParams map[string]string) (map[string]string, error) {
	ref, err := annotationSecretRef(c)
	if err != nil {
		return nil, err
	}
	if ref == nil && classParams != nil {
		if ref, err = classSecretRef(snapshotterSecret, classParams, c, true); err != nil {
			return nil, err
		}
	}
	return h.credentials(ctx, ref)
}

// snapshotName is upstream's: prefix, "-", and the VolumeSnapshot's UID, whole, or without dashes and cut to
// --snapshot-name-uuid-length characters.
func (h *Handler) snapshotName(c *snapv1.VolumeSnapshotContent) (string, error) {
	uid := string(c.Spec.VolumeSnapshotRef.UID)
	if uid == "" {
		return "", fmt.Errorf("volumesnapshotcontent %s: spec.volumeSnapshotRef.uid is empty; the content is not bound to a VolumeSnapshot yet", c.Name)
	}
	return createName(h.cfg.NamePrefix, h.cfg.NameUUIDLength, uid), nil
}

// createName is the name a create call of a snapshot or a group snapshot goes under: prefix, a dash and the
// object's UID, without its dashes and cut to uuidLength when that is not negative
// (--snapshot-name-uuid-length, --groupsnapshot-name-uuid-length).
func createName(prefix string, uuidLength int, uid string) string {
	if uuidLength < 0 {
		return prefix + "-" + uid
	}
	short := strings.ReplaceAll(uid, "-", "")
	return prefix + "-" + short[:min(uuidLength, len(short))]
}

// reservedStripped are a class's parameters for the driver: the csi.storage.k8s.io/ keys are the
// sidecars', and one the snapshotter does not know is refused, as upstream does (for both kinds of class).
func reservedStripped(kind, class string, params map[string]string) (map[string]string, error) {
	out := make(map[string]string, len(params))
	for _, k := range sortedKeys(params) {
		if !strings.HasPrefix(k, snapapi.ParamPrefix) {
			out[k] = params[k]
			continue
		}
		switch k {
		case snapapi.ParamSnapshotterSecretName, snapapi.ParamSnapshotterSecretNamespace,
			snapapi.ParamSnapshotterListSecretName, snapapi.ParamSnapshotterListSecretNamespace,
			snapapi.ParamGroupSnapshotterSecretName, snapapi.ParamGroupSnapshotterSecretNamespace,
			snapapi.ParamGroupGetSecretName, snapapi.ParamGroupGetSecretNamespace:
		default:
			return nil, fmt.Errorf("%s %s: parameters: unknown key %q with the reserved prefix %s", kind, class, k, snapapi.ParamPrefix)
		}
	}
	return out, nil
}

func sortedKeys(m map[string]string) []string {
	return slices.Sorted(maps.Keys(m))
}

func className(c *snapv1.VolumeSnapshotContent) string {
	if c.Spec.VolumeSnapshotClassName == nil {
		return ""
	}
	return *c.Spec.VolumeSnapshotClassName
}
