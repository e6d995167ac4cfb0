package controller

import (
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/stowage-csi/stowage/shared/kubeclient"
)

// trimVolume returns the PersistentVolume informer's transform: each PV is cached with only what the
// attacher reads, which at 10,000 volumes is most of its memory. It reads a PV's CSI source, access modes,
// volume mode and mount options (to publish), and its name, finalizers and deletionTimestamp (to attach
// or release it), and writes PVs only with JSON patches of their finalizers, so nothing left out can be
// written back. In-tree volumes keep their whole spec for the CSI translation; PVs of another CSI driver
// keep only the driver's name, which is what tells the handler they are not its own.
func trimVolume(driver string) cache.TransformFunc {
	return func(o any) (any, error) {
		pv, ok := o.(*v1.PersistentVolume)
		if !ok {
			return o, nil
		}
		pv.ManagedFields = nil
		pv.Labels, pv.Annotations, pv.OwnerReferences = nil, nil, nil
		pv.Status = v1.PersistentVolumeStatus{}
		kubeclient.InternAll(pv.Finalizers)
		switch src := pv.Spec.CSI; {
		case src == nil:
			pv.Spec.Capacity = nil
		case src.Driver != driver:
			pv.Spec = v1.PersistentVolumeSpec{PersistentVolumeSource: v1.PersistentVolumeSource{
				CSI: &v1.CSIPersistentVolumeSource{Driver: src.Driver},
			}}
		default:
			pv.Spec = v1.PersistentVolumeSpec{
				PersistentVolumeSource: pv.Spec.PersistentVolumeSource,
				AccessModes:            pv.Spec.AccessModes,
				VolumeMode:             pv.Spec.VolumeMode,
				MountOptions:           pv.Spec.MountOptions,
			}
		}
		kubeclient.InternVolumeSpec(&pv.Spec)
		return pv, nil
	}
}

// trimAttachment is the VolumeAttachment informer's transform: the attacher reads and patches the whole
// object, so nothing is dropped but managed fields; the strings that repeat across attachments (driver, node,
// finalizer, annotation and attachment metadata keys) are shared.
func trimAttachment(o any) (any, error) {
	va, ok := o.(*storagev1.VolumeAttachment)
	if !ok {
		return o, nil
	}
	va.ManagedFields = nil
	kubeclient.InternMeta(&va.ObjectMeta)
	va.Spec.Attacher, va.Spec.NodeName = kubeclient.Intern(va.Spec.Attacher), kubeclient.Intern(va.Spec.NodeName)
	va.Status.AttachmentMetadata = kubeclient.InternKeys(va.Status.AttachmentMetadata, nil)
	return va, nil
}

// settled reports whether a VolumeAttachment's sync would do nothing: it is attached and not being
// deleted (both handlers return at once then). Such objects stay out of the queue, so the initial LIST of
// thousands of attached volumes costs no syncs, whose garbage the Go runtime would keep as resident memory.
// A VolumeAttachment the ListVolumes reconcile finds detached behind Kubernetes' back is queued by the
// reconcile itself.
func settled(va *storagev1.VolumeAttachment) bool {
	return va.Status.Attached && va.DeletionTimestamp == nil
}
