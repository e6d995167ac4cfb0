package handler

import (
	"context"
	"fmt"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/kubernetes-csi/csi-lib-utils/accessmodes"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/klog/v2"

	"github.com/stowage-csi/stowage/shared/kubeclient"
)

// volume is what a VolumeAttachment's source resolves to.
type volume struct {
	spec      *v1.PersistentVolumeSpec // with spec.csi set (translated for migrated in-tree volumes)
	migrated  bool
	secretRef *v1.SecretReference
	// deleting names the PersistentVolume when it has a deletionTimestamp; "" otherwise and for inline volumes.
	deleting string
}

// resolveVolume reads the volume a VolumeAttachment names: its PersistentVolume from the informer cache,
// or its inline spec, translated to CSI when it is a migrated in-tree volume.
func (h *CSI) resolveVolume(logger klog.Logger, va *storagev1.VolumeAttachment) (*volume, error) {
	var name, deleting string
	var spec *v1.PersistentVolumeSpec
	switch {
	case va.Spec.Source.PersistentVolumeName != nil:
		name = *va.Spec.Source.PersistentVolumeName
		pv, err := h.cfg.PVLister.Get(name)
		if err != nil {
			return nil, fmt.Errorf("spec.source.persistentVolumeName: persistentvolume %q: %w", name, err)
		}
		spec = &pv.Spec
		if pv.DeletionTimestamp != nil {
			deleting = name
		}
	case va.Spec.Source.InlineVolumeSpec != nil:
		name = va.Name
		spec = va.Spec.Source.InlineVolumeSpec
	default:
		return nil, fmt.Errorf("spec.source has neither persistentVolumeName nor inlineVolumeSpec")
	}
	csiSpec, migrated, err := h.translator.ToCSI(logger, name, spec)
	if err != nil {
		return nil, err
	}
	if csiSpec.CSI.Driver != h.cfg.Driver {
		return nil, fmt.Errorf("volume %q: spec.csi.driver is %q, not %q", name, csiSpec.CSI.Driver, h.cfg.Driver)
	}
	if csiSpec.CSI.VolumeHandle == "" {
		return nil, fmt.Errorf("volume %q: spec.csi.volumeHandle is empty", name)
	}
	return &volume{spec: csiSpec, migrated: migrated, secretRef: csiSpec.CSI.ControllerPublishSecretRef, deleting: deleting}, nil
}

// capability is the CSI volume capability for spec: block or mount (with fsType, falling back to
// --default-fstype, and the PV's mount options), and the access mode mapped as upstream maps it.
func (h *CSI) capability(spec *v1.PersistentVolumeSpec) (*csi.VolumeCapability, error) {
	mode, err := accessmodes.ToCSIAccessMode(spec.AccessModes, h.cfg.Capabilities.SingleNodeMultiWriter)
	if err != nil {
		return nil, fmt.Errorf("spec.accessModes: %w", err)
	}
	capability := &csi.VolumeCapability{AccessMode: &csi.VolumeCapability_AccessMode{Mode: mode}}
	if spec.VolumeMode != nil && *spec.VolumeMode == v1.PersistentVolumeBlock {
		capability.AccessType = &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}}
		return capability, nil
	}
	fsType := spec.CSI.FSType
	if fsType == "" {
		fsType = h.cfg.DefaultFSType
	}
	capability.AccessType = &csi.VolumeCapability_Mount{
		Mount: &csi.VolumeCapability_MountVolume{FsType: fsType, MountFlags: spec.MountOptions},
	}
	return capability, nil
}

// nodeIDForAttach is the driver's ID for the node: from the node's CSINode, or, when the CSINode is gone
// or lacks the driver, from the VolumeAttachment's node-id annotation.
func (h *CSI) nodeIDForAttach(va *storagev1.VolumeAttachment) (string, error) {
	csiNode, err := h.cfg.CSINodeLister.Get(va.Spec.NodeName)
	if err == nil {
		for _, d := range csiNode.Spec.Drivers {
			if d.Name == h.cfg.Driver && d.NodeID != "" {
				return d.NodeID, nil
			}
		}
	} else if !apierrors.IsNotFound(err) {
		return "", fmt.Errorf("csinode %q: %w", va.Spec.NodeName, err)
	}
	if id := va.Annotations[NodeIDAnnotation]; id != "" {
		return id, nil
	}
	return "", fmt.Errorf("spec.nodeName: csinode %q has no node ID for driver %s", va.Spec.NodeName, h.cfg.Driver)
}

// nodeIDForDetach prefers the node ID the attach used (the annotation): the node may be gone by now.
func (h *CSI) nodeIDForDetach(va *storagev1.VolumeAttachment) (string, error) {
	if id := va.Annotations[NodeIDAnnotation]; id != "" {
		return id, nil
	}
	return h.nodeIDForAttach(va)
}

// secrets reads the controller-publish secret with a direct GET (no cluster-wide Secret informer, so the
// attacher needs "get" on Secrets only).
func (h *CSI) secrets(ctx context.Context, ref *v1.SecretReference) (map[string]string, error) {
	out, err := kubeclient.CSISecrets(ctx, h.cfg.Client, ref)
	if err != nil {
		return nil, fmt.Errorf("controllerPublishSecretRef: %w", err)
	}
	return out, nil
}

func formatSecretRef(ref *v1.SecretReference) string {
	if ref == nil {
		return ""
	}
	return ref.Namespace + "/" + ref.Name
}

func parseSecretRef(s string) (*v1.SecretReference, error) {
	if s == "" {
		return nil, nil
	}
	ns, name, ok := strings.Cut(s, "/")
	if !ok || ns == "" || name == "" {
		return nil, fmt.Errorf("annotation %s: %q is not namespace/name", PublishSecretAnnotation, s)
	}
	return &v1.SecretReference{Namespace: ns, Name: name}, nil
}
