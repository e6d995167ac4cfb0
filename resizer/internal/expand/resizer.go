package expand

import (
	"context"
	"fmt"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/kubernetes"

	"github.com/stowage-csi/stowage/shared/kubeclient"
)

// Resizer grows one volume. The CSI resizer or the trivial one is chosen once at start-up from the driver's
// capabilities, so the sync path has no capability checks.
type Resizer interface {
	// Resize grows pv's volume to size and returns the size it now has and whether the node must still
	// expand the filesystem.
	Resize(ctx context.Context, pv *v1.PersistentVolume, size resource.Quantity) (resource.Quantity, bool, error)
	// ControllerExpands is false for the trivial resizer, which leaves all the work to the node.
	ControllerExpands() bool
}

// Expander is the CSI side of a resize: ControllerExpandVolume.
type Expander interface {
	Expand(ctx context.Context, req *csi.ControllerExpandVolumeRequest) (int64, bool, error)
}

// CSI is the Resizer for drivers with the EXPAND_VOLUME controller capability.
type CSI struct {
	csi    Expander
	client kubernetes.Interface
	// singleNodeMultiWriter is the driver's SINGLE_NODE_MULTI_WRITER capability, learnt at start-up: it
	// changes how ReadWriteOnce and ReadWriteOncePod map to CSI access modes.
	singleNodeMultiWriter bool
}

// NewCSI returns the CSI resizer. Secrets named by a PersistentVolume's controllerExpandSecretRef are read
// through client.
func NewCSI(expander Expander, client kubernetes.Interface, singleNodeMultiWriter bool) *CSI {
	return &CSI{csi: expander, client: client, singleNodeMultiWriter: singleNodeMultiWriter}
}

// ControllerExpands is true: the driver grows the volume.
func (r *CSI) ControllerExpands() bool { return true }

// Resize calls ControllerExpandVolume. Upstream calls ControllerGetCapabilities before every resize to build
// the volume capability; the capabilities do not change while the driver runs, so they were read once.
func (r *CSI) Resize(ctx context.Context, pv *v1.PersistentVolume, size resource.Quantity) (resource.Quantity, bool, error) {
	src := pv.Spec.CSI
	capability, err := volumeCapability(pv, r.singleNodeMultiWriter)
	if err != nil {
		return size, false, err
	}
	req := &csi.ControllerExpandVolumeRequest{
		VolumeId:         src.VolumeHandle,
		CapacityRange:    &csi.CapacityRange{RequiredBytes: size.Value()},
		VolumeCapability: capability,
	}
	if ref := src.ControllerExpandSecretRef; ref != nil {
		if req.Secrets, err = r.secrets(ctx, ref); err != nil {
			return size, false, fmt.Errorf("persistentvolume %s: spec.csi.controllerExpandSecretRef: %w", pv.Name, err)
		}
	}
	bytes, nodeExpansion, err := r.csi.Expand(ctx, req)
	if err != nil {
		return size, false, err
	}
	if bytes == 0 {
		// A driver may leave capacity_bytes unset; the request was then met as asked.
		return size, nodeExpansion, nil
	}
	return *resource.NewQuantity(bytes, resource.BinarySI), nodeExpansion, nil
}

// secrets reads the Secret ref names, with a direct GET as upstream (no Secret informer, no list RBAC).
func (r *CSI) secrets(ctx context.Context, ref *v1.SecretReference) (map[string]string, error) {
	out, err := kubeclient.CSISecrets(ctx, r.client, ref)
	if err != nil {
		return nil, fmt.Errorf("reading %w", err)
	}
	return out, nil
}

// volumeCapability describes pv to the driver: block or mount with the PV's fsType, and the access mode
// upstream's accessmodes.ToCSIAccessMode picks.
func volumeCapability(pv *v1.PersistentVolume, singleNodeMultiWriter bool) (*csi.VolumeCapability, error) {
	mode, err := accessMode(pv.Spec.AccessModes, singleNodeMultiWriter)
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "persistentvolume %s: spec.accessModes: %v", pv.Name, err)
	}
	c := &csi.VolumeCapability{AccessMode: &csi.VolumeCapability_AccessMode{Mode: mode}}
	if pv.Spec.VolumeMode != nil && *pv.Spec.VolumeMode == v1.PersistentVolumeBlock {
		c.AccessType = &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}}
	} else {
		c.AccessType = &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{FsType: pv.Spec.CSI.FSType}}
	}
	return c, nil
}

func accessMode(modes []v1.PersistentVolumeAccessMode, singleNodeMultiWriter bool) (csi.VolumeCapability_AccessMode_Mode, error) {
	has := map[v1.PersistentVolumeAccessMode]bool{}
	for _, m := range modes {
		has[m] = true
	}
	switch {
	case has[v1.ReadWriteOncePod] && len(has) > 1:
		return 0, fmt.Errorf("ReadWriteOncePod may not be combined with other access modes")
	case has[v1.ReadOnlyMany] && has[v1.ReadWriteOnce] && !has[v1.ReadWriteMany]:
		return 0, fmt.Errorf("ReadOnlyMany and ReadWriteOnce together are not supported")
	case has[v1.ReadWriteMany]:
		return csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER, nil
	case has[v1.ReadOnlyMany]:
		return csi.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY, nil
	case has[v1.ReadWriteOncePod] && singleNodeMultiWriter:
		return csi.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER, nil
	case has[v1.ReadWriteOnce] && singleNodeMultiWriter:
		return csi.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER, nil
	case has[v1.ReadWriteOnce] || has[v1.ReadWriteOncePod]:
		return csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER, nil
	}
	return 0, fmt.Errorf("no supported access mode in %v", modes)
}

// Trivial is the Resizer for drivers without the EXPAND_VOLUME controller capability: there is nothing to
// call, the PersistentVolume takes the new size and the node expands the volume.
type Trivial struct{}

// ControllerExpands is false: the node does all the work.
func (Trivial) ControllerExpands() bool { return false }

// Resize accepts size and asks for node expansion.
func (Trivial) Resize(_ context.Context, _ *v1.PersistentVolume, size resource.Quantity) (resource.Quantity, bool, error) {
	return size, true, nil
}
