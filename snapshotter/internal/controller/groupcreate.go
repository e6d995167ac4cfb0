package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	groupv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/stowage-csi/stowage/snapshotter/internal/snapapi"
)

// createGroupContent creates the content of a dynamic group snapshot: the selected claims' volume handles as
// spec.source.volumeHandles, the class's driver and deletion policy, already bound (volumeGroupSnapshotRef
// with the group's UID) and already carrying its bound finalizer, which upstream adds in a second write.
func (c *Controller) createGroupContent(ctx context.Context, gs *groupv1.VolumeGroupSnapshot, class *groupv1.VolumeGroupSnapshotClass) (*groupv1.VolumeGroupSnapshotContent, error) {
	if class == nil {
		return nil, fmt.Errorf("failed to take group snapshot %s without a group snapshot class", gs.Name)
	}
	pvs, err := c.groupVolumes(ctx, gs)
	if err != nil {
		return nil, err
	}
	handles := make([]string, 0, len(pvs))
	for _, pv := range pvs {
		if pv.Spec.CSI == nil {
			c.cfg.Events.Event(gs, v1.EventTypeWarning, "CreateGroupSnapshotContentFailed", "Cannot snapshot a non-CSI volume: "+pv.Name)
			return nil, fmt.Errorf("cannot snapshot a non-CSI volume for group snapshot %s/%s: %s", gs.Namespace, gs.Name, pv.Name)
		}
		if pv.Spec.CSI.Driver != class.Driver {
			msg := fmt.Sprintf("Volume CSI driver (%s) mismatch with VolumeGroupSnapshotClass (%s) %s/%s: %s", pv.Spec.CSI.Driver, class.Driver, gs.Namespace, gs.Name, pv.Name)
			c.cfg.Events.Event(gs, v1.EventTypeWarning, "CreateGroupSnapshotContentFailed", msg)
			return nil, errors.New(msg)
		}
		handles = append(handles, pv.Spec.CSI.VolumeHandle)
	}
	name := dynamicGroupContentName(gs)
	secret, err := groupSecretRef(class.Parameters, name, gs)
	if err != nil {
		return nil, fmt.Errorf("volumegroupsnapshotclass %s parameters: %w", class.Name, err)
	}
	gc := &groupv1.VolumeGroupSnapshotContent{
		ObjectMeta: metav1.ObjectMeta{Name: name, Finalizers: []string{snapapi.GroupContentBoundFinalizer}},
		Spec: groupv1.VolumeGroupSnapshotContentSpec{
			VolumeGroupSnapshotRef: v1.ObjectReference{
				Kind: "VolumeGroupSnapshot", APIVersion: groupv1.SchemeGroupVersion.String(),
				Namespace: gs.Namespace, Name: gs.Name, UID: gs.UID, ResourceVersion: gs.ResourceVersion,
			},
			Source:                       groupv1.VolumeGroupSnapshotContentSource{VolumeHandles: handles},
			VolumeGroupSnapshotClassName: &class.Name,
			DeletionPolicy:               class.DeletionPolicy,
			Driver:                       class.Driver,
		},
	}
	if secret != nil {
		gc.Annotations = map[string]string{
			snapapi.AnnGroupDeletionSecretName:      secret.Name,
			snapapi.AnnGroupDeletionSecretNamespace: secret.Namespace,
		}
	}
	created, err := c.cfg.Snap.GroupsnapshotV1().VolumeGroupSnapshotContents().Create(ctx, gc, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return gc, nil // created by an earlier sync the cache has not seen yet
	}
	if err != nil {
		c.cfg.Events.Event(gs, v1.EventTypeWarning, "CreateGroupSnapshotContentFailed",
			fmt.Sprintf("Error creating volume group snapshot content object for group snapshot %s/%s: %v.", gs.Namespace, gs.Name, err))
		return nil, fmt.Errorf("creating VolumeGroupSnapshotContent %s: %w", name, err)
	}
	c.groups.contentsWritten.Wrote(name, created)
	klog.FromContext(ctx).V(2).Info("Created VolumeGroupSnapshotContent", "volumegroupsnapshotcontent", name, "volumeHandles", handles)
	c.cfg.Events.Event(gs, v1.EventTypeNormal, "CreatingGroupSnapshot", fmt.Sprintf("Waiting for a group snapshot %s/%s to be created by the CSI driver.", gs.Namespace, gs.Name))
	return created, nil
}

// groupVolumes returns the bound volumes of the claims the group's selector picks, in the claims' name order.
// Claims come from the cache (upstream lists them from the API server, matchLabels only; the cache and the full
// selector cost no request); each volume is read from the API server, as for a single snapshot.
func (c *Controller) groupVolumes(ctx context.Context, gs *groupv1.VolumeGroupSnapshot) ([]*v1.PersistentVolume, error) {
	sel, err := metav1.LabelSelectorAsSelector(gs.Spec.Source.Selector)
	if err != nil {
		return nil, fmt.Errorf("volumegroupsnapshot %s/%s spec.source.selector: %w", gs.Namespace, gs.Name, err)
	}
	pvcs, err := c.claims.PersistentVolumeClaims(gs.Namespace).List(sel)
	if err != nil {
		return nil, err
	}
	if len(pvcs) == 0 {
		return nil, fmt.Errorf("label selector %s for group snapshot not applied to any PVC", metav1.FormatLabelSelector(gs.Spec.Source.Selector))
	}
	slices.SortFunc(pvcs, func(a, b *v1.PersistentVolumeClaim) int { return strings.Compare(a.Name, b.Name) })
	pvs := make([]*v1.PersistentVolume, 0, len(pvcs))
	for _, pvc := range pvcs {
		if pvc.Status.Phase != v1.ClaimBound {
			return nil, fmt.Errorf("the PVC %s is not yet bound to a PV, will not attempt to take a group snapshot", pvc.Name)
		}
		pv, err := c.cfg.Kube.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("failed to retrieve PV %s from the API server: %w", pvc.Spec.VolumeName, err)
		}
		ref := pv.Spec.ClaimRef
		if ref == nil || ref.Name != pvc.Name || ref.Namespace != pvc.Namespace || (ref.UID != "" && ref.UID != pvc.UID) {
			return nil, errors.New("claim in dataSource not bound or invalid")
		}
		pvs = append(pvs, pv)
	}
	return pvs, nil
}

// groupSecretRef resolves the group class's csi.storage.k8s.io/group-snapshotter-secret-name and -namespace,
// whose templates may use ${volumegroupsnapshotcontent.name}, ${volumegroupsnapshot.namespace} and, in the
// name only, ${volumegroupsnapshot.name}. Nil when the class names no secret.
func groupSecretRef(params map[string]string, contentName string, gs *groupv1.VolumeGroupSnapshot) (*v1.SecretReference, error) {
	return resolveSecretRef(params, secretParams{snapapi.ParamGroupSnapshotterSecretName, snapapi.ParamGroupSnapshotterSecretNamespace,
		"group snapshotter", "volumegroupsnapshotcontent", "volumegroupsnapshot"}, contentName, gs)
}
