package provision

import (
	"context"
	"fmt"
	"slices"

	"github.com/container-storage-interface/spec/lib/go/csi"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
)

var everything = labels.Everything()

// planClone checks upstream's clone rules (source claim not larger than the new one, bound, same driver, same
// volume mode) and sets the source volume as the content source.
func (p *Provisioner) planClone(claim *v1.PersistentVolumeClaim, plan *createPlan, size int64) error {
	if !p.cfg.Capabilities.Clone {
		return slow(fmt.Errorf("dataSource: driver %s does not support cloning (no CLONE_VOLUME capability)", p.cfg.DriverName))
	}
	src, err := p.Claims.PersistentVolumeClaims(claim.Namespace).Get(plan.sourceName)
	if err != nil {
		return fmt.Errorf("dataSource: get source PVC %s/%s: %w", claim.Namespace, plan.sourceName, err)
	}
	if src.DeletionTimestamp != nil {
		return fmt.Errorf("dataSource: source PVC %s/%s is being deleted", src.Namespace, src.Name)
	}
	// As upstream: the source claim's request, not its PV's capacity, is the least the clone may ask for. A
	// driver that rounded the source volume up may round the clone up the same way.
	if srcSize := src.Spec.Resources.Requests[v1.ResourceStorage]; size < srcSize.Value() {
		return slow(fmt.Errorf("dataSource: error, new PVC request must be greater than or equal in size to the specified PVC data source, requested %d but source is %d (PVC %s/%s)",
			size, srcSize.Value(), src.Namespace, src.Name))
	}
	if src.Status.Phase != v1.ClaimBound || src.Spec.VolumeName == "" {
		return fmt.Errorf("dataSource: source PVC %s/%s is not bound yet", src.Namespace, src.Name)
	}
	pv, err := p.Volumes.Get(src.Spec.VolumeName)
	if err != nil {
		return fmt.Errorf("dataSource: get PV %s of source PVC %s/%s: %w", src.Spec.VolumeName, src.Namespace, src.Name, err)
	}
	if pv.Spec.CSI == nil || pv.Spec.CSI.Driver != p.cfg.DriverName {
		return slow(fmt.Errorf("dataSource: source PVC %s/%s is not a volume of driver %s", src.Namespace, src.Name, p.cfg.DriverName))
	}
	if pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.UID != src.UID {
		return fmt.Errorf("dataSource: PV %s is not bound to source PVC %s/%s", pv.Name, src.Namespace, src.Name)
	}
	if modeOf(src.Spec.VolumeMode) != modeOf(claim.Spec.VolumeMode) {
		return slow(fmt.Errorf("dataSource: volume mode %s differs from source PVC %s/%s (%s)", modeOf(claim.Spec.VolumeMode), src.Namespace, src.Name, modeOf(src.Spec.VolumeMode)))
	}
	plan.req.VolumeContentSource = &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Volume{
		Volume: &csi.VolumeContentSource_VolumeSource{VolumeId: pv.Spec.CSI.VolumeHandle},
	}}
	return nil
}

func modeOf(m *v1.PersistentVolumeMode) v1.PersistentVolumeMode {
	if m == nil {
		return v1.PersistentVolumeFilesystem
	}
	return *m
}

// protectCloneSource adds the cloning-protection finalizer to the source PVC if it lacks it.
func (p *Provisioner) protectCloneSource(ctx context.Context, namespace, name string) error {
	src, err := p.Claims.PersistentVolumeClaims(namespace).Get(name)
	if err != nil {
		return fmt.Errorf("dataSource: get source PVC %s/%s: %w", namespace, name, err)
	}
	_, err = p.mutateClaim(ctx, src, func(c *v1.PersistentVolumeClaim) {
		if !slices.Contains(c.Finalizers, CloneFinalizer) {
			c.Finalizers = append(c.Finalizers, CloneFinalizer)
		}
	})
	return err
}

// SyncCloneSource removes the cloning-protection finalizer from a source PVC once no claim is being cloned from
// it any more. The controller calls it for every PVC event that could change the answer.
func (p *Provisioner) SyncCloneSource(ctx context.Context, namespace, name string) error {
	return p.syncCloneSource(ctx, namespace, name, "")
}

// syncCloneSource is SyncCloneSource that does not count the claim with UID except, whose provisioning just
// finished (its binding not in the cache yet) or was undone.
func (p *Provisioner) syncCloneSource(ctx context.Context, namespace, name string, except types.UID) error {
	src, err := p.Claims.PersistentVolumeClaims(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if !slices.Contains(src.Finalizers, CloneFinalizer) {
		return nil
	}
	n, err := p.pendingUsers(namespace, sourceClone, name, except)
	if err != nil || n > 0 {
		return err
	}
	_, err = p.mutateClaim(ctx, src, func(c *v1.PersistentVolumeClaim) {
		c.Finalizers = slices.DeleteFunc(c.Finalizers, func(f string) bool { return f == CloneFinalizer })
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
