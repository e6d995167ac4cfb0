package controller

import (
	"context"
	"errors"
	"fmt"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"

	"github.com/stowage-csi/stowage/snapshotter/internal/snapapi"
)

// createContent creates the content of a dynamic snapshot: the source claim gets the pvc-as-source-protection
// finalizer first (so it cannot go while the snapshot is taken), then the content is created already bound
// (volumeSnapshotRef with the snapshot's UID) and already carrying its bound finalizer, which upstream adds in a
// second write.
func (c *Controller) createContent(ctx context.Context, in createInput) (*snapv1.VolumeSnapshotContent, error) {
	vs := in.vs
	if err := c.protectClaim(ctx, vs); err != nil {
		return nil, err
	}
	if in.class == nil {
		return nil, fmt.Errorf("failed to take snapshot %s without a snapshot class", vs.Name)
	}
	pv := in.pv
	if pv == nil {
		var err error
		if pv, err = c.sourceVolume(ctx, vs); err != nil {
			return nil, err
		}
	}
	if pv.Spec.CSI == nil {
		return nil, fmt.Errorf("cannot find CSI PersistentVolumeSource for volume %s", pv.Name)
	}
	name := dynamicContentName(vs)
	secret, err := secretRef(in.class.Parameters, name, vs)
	if err != nil {
		return nil, fmt.Errorf("volumesnapshotclass %s parameters: %w", in.class.Name, err)
	}
	handle := pv.Spec.CSI.VolumeHandle
	content := &snapv1.VolumeSnapshotContent{
		ObjectMeta: metav1.ObjectMeta{Name: name, Finalizers: []string{snapapi.ContentBoundFinalizer}},
		Spec: snapv1.VolumeSnapshotContentSpec{
			VolumeSnapshotRef: v1.ObjectReference{
				Kind: "VolumeSnapshot", APIVersion: snapv1.SchemeGroupVersion.String(),
				Namespace: vs.Namespace, Name: vs.Name, UID: vs.UID, ResourceVersion: vs.ResourceVersion,
			},
			Source:                  snapv1.VolumeSnapshotContentSource{VolumeHandle: &handle},
			VolumeSnapshotClassName: &in.class.Name,
			DeletionPolicy:          in.class.DeletionPolicy,
			Driver:                  in.class.Driver,
		},
	}
	if c.cfg.DistributedSnapshotting {
		node, err := c.managedBy(pv)
		if err != nil {
			return nil, err
		}
		if node != "" {
			content.Labels = map[string]string{snapapi.LabelManagedBy: node}
		}
	}
	if c.cfg.PreventVolumeModeConversion && pv.Spec.VolumeMode != nil {
		mode := *pv.Spec.VolumeMode
		content.Spec.SourceVolumeMode = &mode
	}
	if secret != nil {
		content.Annotations = map[string]string{
			snapapi.AnnDeletionSecretName:      secret.Name,
			snapapi.AnnDeletionSecretNamespace: secret.Namespace,
		}
	}
	created, err := c.cfg.Snap.SnapshotV1().VolumeSnapshotContents().Create(ctx, content, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		// Created by an earlier sync whose object the cache has not seen yet: same name, same snapshot UID.
		return content, nil
	}
	if err != nil {
		msg := fmt.Sprintf("Error creating volume snapshot content object for snapshot %s/%s: %v.", vs.Namespace, vs.Name, err)
		c.cfg.Events.Event(vs, v1.EventTypeWarning, "CreateSnapshotContentFailed", msg)
		return nil, fmt.Errorf("creating VolumeSnapshotContent %s: %w", name, err)
	}
	c.contentsWritten.Wrote(name, created)
	klog.FromContext(ctx).V(2).Info("Created VolumeSnapshotContent", "volumesnapshotcontent", name, "volumeHandle", handle)
	c.cfg.Events.Event(vs, v1.EventTypeNormal, "CreatingSnapshot", fmt.Sprintf("Waiting for a snapshot %s/%s to be created by the CSI driver.", vs.Namespace, vs.Name))
	return created, nil
}

// sourceVolume returns the bound volume of the snapshot's source claim. The claim comes from the cache; the
// volume is read from the API server, as upstream does, so no cluster-wide PersistentVolume cache is kept.
func (c *Controller) sourceVolume(ctx context.Context, vs *snapv1.VolumeSnapshot) (*v1.PersistentVolume, error) {
	pvc, err := c.sourceClaim(vs)
	if err != nil {
		return nil, err
	}
	if pvc.Status.Phase != v1.ClaimBound {
		return nil, fmt.Errorf("the PVC %s is not yet bound to a PV, will not attempt to take a snapshot", pvc.Name)
	}
	pv, err := c.cfg.Kube.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("failed to retrieve PV %s from the API server: %w", pvc.Spec.VolumeName, err)
	}
	ref := pv.Spec.ClaimRef
	if ref == nil || ref.Name != pvc.Name || ref.Namespace != pvc.Namespace || (ref.UID != "" && ref.UID != pvc.UID) {
		return nil, errors.New("claim in dataSource not bound or invalid")
	}
	return pv, nil
}

// sourceClaim is the snapshot's source claim from the cache.
func (c *Controller) sourceClaim(vs *snapv1.VolumeSnapshot) (*v1.PersistentVolumeClaim, error) {
	name := vs.Spec.Source.PersistentVolumeClaimName
	if name == nil || *name == "" {
		return nil, fmt.Errorf("the PVC name is not specified in snapshot %s/%s", vs.Namespace, vs.Name)
	}
	pvc, err := c.claims.PersistentVolumeClaims(vs.Namespace).Get(*name)
	if err != nil {
		return nil, fmt.Errorf("failed to retrieve PVC %s from the lister: %w", *name, err)
	}
	return pvc, nil
}

// managedBy is the node whose csi-snapshotter handles a node-local volume: the first node matching the volume's
// required node affinity, "" for a volume without one.
func (c *Controller) managedBy(pv *v1.PersistentVolume) (string, error) {
	if pv.Spec.NodeAffinity == nil || pv.Spec.NodeAffinity.Required == nil || c.nodes == nil {
		return "", nil
	}
	nodes, err := c.nodes.List(everything)
	if err != nil {
		return "", err
	}
	for _, node := range nodes {
		if ok, _ := corev1helpers.MatchNodeSelectorTerms(node, pv.Spec.NodeAffinity.Required); ok {
			return node.Name, nil
		}
	}
	return "", nil
}
