package controller

import (
	"context"
	"slices"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/stowage-csi/stowage/shared/patch"
)

// everything selects every object of a lister.
var everything = labels.Everything()

// dynamicContentName is the name upstream gives a dynamic snapshot's content; both halves rely on it.
func dynamicContentName(vs *snapv1.VolumeSnapshot) string { return "snapcontent-" + string(vs.UID) }

func isBound(vs *snapv1.VolumeSnapshot) bool {
	return vs.Status != nil && vs.Status.BoundVolumeSnapshotContentName != nil && *vs.Status.BoundVolumeSnapshotContentName != ""
}

func isReady(vs *snapv1.VolumeSnapshot) bool {
	return vs.Status != nil && vs.Status.ReadyToUse != nil && *vs.Status.ReadyToUse
}

func isCreated(vs *snapv1.VolumeSnapshot) bool {
	return vs.Status != nil && vs.Status.CreationTime != nil
}

// refersTo reports whether content's volumeSnapshotRef names vs exactly, UID included.
func refersTo(content *snapv1.VolumeSnapshotContent, vs *snapv1.VolumeSnapshot) bool {
	ref := content.Spec.VolumeSnapshotRef
	return ref.Name == vs.Name && ref.Namespace == vs.Namespace && ref.UID == vs.UID
}

func missingAny(have, want []string) bool {
	for _, w := range want {
		if !slices.Contains(have, w) {
			return true
		}
	}
	return false
}

func ignoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// snapshotPatch and contentPatch are the clients' Patch, remembering each object written (see ownwrites.Latest).
func (c *Controller) snapshotPatch(ns string) patch.Func[*snapv1.VolumeSnapshot] {
	return func(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, sub ...string) (*snapv1.VolumeSnapshot, error) {
		vs, err := c.cfg.Snap.SnapshotV1().VolumeSnapshots(ns).Patch(ctx, name, pt, data, opts, sub...)
		if err == nil {
			c.snapshotsWritten.Wrote(ns+"/"+name, vs)
		}
		return vs, err
	}
}

func (c *Controller) contentPatch() patch.Func[*snapv1.VolumeSnapshotContent] {
	return func(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, sub ...string) (*snapv1.VolumeSnapshotContent, error) {
		content, err := c.cfg.Snap.SnapshotV1().VolumeSnapshotContents().Patch(ctx, name, pt, data, opts, sub...)
		if err == nil {
			c.contentsWritten.Wrote(name, content)
		}
		return content, err
	}
}

// content is the content name from the cache, or this controller's newer write of it.
func (c *Controller) content(name string) (*snapv1.VolumeSnapshotContent, error) {
	content, err := c.contents.Get(name)
	if apierrors.IsNotFound(err) {
		if created, ok := c.contentsWritten.Get(name); ok {
			return created, nil
		}
	}
	if err != nil {
		return nil, err
	}
	return c.contentsWritten.Of(name, content), nil
}

// getSnapshot, getContent and getClaim re-read an object after a 409, for patch.RetryOnConflict.
func (c *Controller) getSnapshot(vs *snapv1.VolumeSnapshot) func(context.Context) (*snapv1.VolumeSnapshot, error) {
	return func(ctx context.Context) (*snapv1.VolumeSnapshot, error) {
		return c.cfg.Snap.SnapshotV1().VolumeSnapshots(vs.Namespace).Get(ctx, vs.Name, metav1.GetOptions{})
	}
}

func (c *Controller) getContent(content *snapv1.VolumeSnapshotContent) func(context.Context) (*snapv1.VolumeSnapshotContent, error) {
	return func(ctx context.Context) (*snapv1.VolumeSnapshotContent, error) {
		return c.cfg.Snap.SnapshotV1().VolumeSnapshotContents().Get(ctx, content.Name, metav1.GetOptions{})
	}
}

func (c *Controller) getClaim(pvc *v1.PersistentVolumeClaim) func(context.Context) (*v1.PersistentVolumeClaim, error) {
	return func(ctx context.Context) (*v1.PersistentVolumeClaim, error) {
		return c.cfg.Kube.CoreV1().PersistentVolumeClaims(pvc.Namespace).Get(ctx, pvc.Name, metav1.GetOptions{})
	}
}
