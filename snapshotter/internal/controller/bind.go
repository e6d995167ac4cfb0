package controller

import (
	"context"
	"errors"
	"fmt"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/stowage-csi/stowage/shared/patch"
	"github.com/stowage-csi/stowage/snapshotter/internal/controller/opmetrics"
)

// syncUnready binds a snapshot that is not bound and ready yet: a pre-provisioned one to the content it names,
// a dynamic one to its content, created here if it does not exist.
func (c *Controller) syncUnready(ctx context.Context, in createInput) error {
	vs := in.vs
	driver, kind := c.driverOf(vs), snapshotType(vs)
	if !isCreated(vs) {
		c.cfg.Metrics.Start(opmetrics.CreateSnapshot, vs.UID, driver, kind)
	}
	c.cfg.Metrics.Start(opmetrics.CreateSnapshotAndReady, vs.UID, driver, kind)

	if vs.Spec.Source.VolumeSnapshotContentName != nil {
		return c.bindPreProvisioned(ctx, vs)
	}
	content, err := c.content(dynamicContentName(vs))
	switch {
	case err == nil:
		if err := c.checkDynamicContent(ctx, vs, content); err != nil {
			return err
		}
	case !apierrors.IsNotFound(err):
		return err
	default:
		if content, err = c.createContent(ctx, in); err != nil {
			c.errorStatus(ctx, vs, true, v1.EventTypeWarning, "SnapshotContentCreationFailed", fmt.Sprintf("Failed to create snapshot content with error %v", err))
			return err
		}
	}
	if _, err := c.updateStatus(ctx, vs, content); err != nil {
		c.errorStatus(ctx, vs, false, v1.EventTypeWarning, "SnapshotStatusUpdateFailed", fmt.Sprintf("Snapshot status update failed, %v", err))
		return err
	}
	return nil
}

// checkDynamicContent refuses a content named like vs's dynamic content that is not one: pre-provisioned, or
// pointing at another snapshot.
func (c *Controller) checkDynamicContent(ctx context.Context, vs *snapv1.VolumeSnapshot, content *snapv1.VolumeSnapshotContent) error {
	if content.Spec.Source.VolumeHandle == nil {
		c.errorStatus(ctx, vs, true, v1.EventTypeWarning, "SnapshotContentMismatch", "VolumeSnapshotContent "+content.Name+" is pre-provisioned while expecting a dynamically provisioned one")
		return fmt.Errorf("volumesnapshot %s/%s expects a dynamically provisioned VolumeSnapshotContent %s but gets a pre-provisioned one", vs.Namespace, vs.Name, content.Name)
	}
	if !refersTo(content, vs) {
		msg := fmt.Sprintf("VolumeSnapshotContent [%s] is bound to a different snapshot", content.Name)
		c.errorStatus(ctx, vs, true, v1.EventTypeWarning, "SnapshotContentMisbound", msg)
		return errors.New(msg)
	}
	if content.Spec.Source.SnapshotHandle != nil {
		c.errorStatus(ctx, vs, true, v1.EventTypeWarning, "SnapshotHandleSet", fmt.Sprintf("Snapshot handle should not be set in content %s/%s for dynamic provisioning", vs.Namespace, vs.Name))
		return fmt.Errorf("volumesnapshotcontent %s spec.source.snapshotHandle must not be set for dynamic provisioning of %s/%s", content.Name, vs.Namespace, vs.Name)
	}
	return nil
}

// bindPreProvisioned binds vs to the content it names, which must be pre-provisioned (a snapshotHandle) and
// point back at vs by name; its volumeSnapshotRef.uid and class are filled in here.
func (c *Controller) bindPreProvisioned(ctx context.Context, vs *snapv1.VolumeSnapshot) error {
	name := *vs.Spec.Source.VolumeSnapshotContentName
	if name == "" {
		return fmt.Errorf("volumesnapshot %s/%s spec.source.volumeSnapshotContentName is empty", vs.Namespace, vs.Name)
	}
	content, err := c.content(name)
	if apierrors.IsNotFound(err) {
		c.errorStatus(ctx, vs, true, v1.EventTypeWarning, "SnapshotContentMissing", "VolumeSnapshotContent is missing")
		return fmt.Errorf("volumesnapshot %s/%s requests a non-existing content %s", vs.Namespace, vs.Name, name)
	}
	if err != nil {
		return err
	}
	if content.Spec.Source.SnapshotHandle == nil {
		c.errorStatus(ctx, vs, true, v1.EventTypeWarning, "SnapshotContentMismatch", "VolumeSnapshotContent is dynamically provisioned while expecting a pre-provisioned one")
		return fmt.Errorf("volumesnapshot %s/%s expects a pre-provisioned VolumeSnapshotContent %s but gets a dynamically provisioned one", vs.Namespace, vs.Name, name)
	}
	ref := content.Spec.VolumeSnapshotRef
	if ref.Name != vs.Name || ref.Namespace != vs.Namespace || (ref.UID != "" && ref.UID != vs.UID) {
		msg := fmt.Sprintf("VolumeSnapshotContent [%s] is bound to a different snapshot", name)
		c.errorStatus(ctx, vs, true, v1.EventTypeWarning, "SnapshotContentMisbound", msg)
		return errors.New(msg)
	}
	if ref.UID == "" || content.Spec.VolumeSnapshotClassName == nil {
		content, err = patch.RetryOnConflict(ctx, content, c.getContent(content), func(ctx context.Context, content *snapv1.VolumeSnapshotContent) (*snapv1.VolumeSnapshotContent, error) {
			return patch.Mutate(ctx, c.contentPatch(), content, func(content *snapv1.VolumeSnapshotContent) {
				content.Spec.VolumeSnapshotRef.UID = vs.UID
				if vs.Spec.VolumeSnapshotClassName != nil {
					content.Spec.VolumeSnapshotClassName = vs.Spec.VolumeSnapshotClassName
				}
			})
		})
		if err != nil {
			c.errorStatus(ctx, vs, true, v1.EventTypeWarning, "SnapshotBindFailed", fmt.Sprintf("Snapshot failed to bind VolumeSnapshotContent, %v", err))
			return fmt.Errorf("volumesnapshot %s/%s: binding VolumeSnapshotContent %s: %w", vs.Namespace, vs.Name, name, err)
		}
	}
	if _, err := c.updateStatus(ctx, vs, content); err != nil {
		c.errorStatus(ctx, vs, false, v1.EventTypeWarning, "SnapshotStatusUpdateFailed", fmt.Sprintf("Snapshot status update failed, %v", err))
		return err
	}
	return nil
}
