// Package handler holds what csi-snapshotter does with one VolumeSnapshotContent of its driver: create the
// snapshot of a dynamic content (create.go), refresh the status of a pre-provisioned one (refresh.go) and
// delete the snapshot of a released one (delete.go). Every write is one patch preconditioned on the
// resourceVersion the handler read, never a full-object Update.
package handler

import (
	"context"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	snapclient "github.com/kubernetes-csi/external-snapshotter/client/v8/clientset/versioned"
	snaplisters "github.com/kubernetes-csi/external-snapshotter/client/v8/listers/volumesnapshot/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"

	"github.com/stowage-csi/stowage/shared/ownwrites"
	"github.com/stowage-csi/stowage/snapshotter/internal/snapapi"
)

// Event reasons, upstream's.
const (
	ReasonCreationFailed = "SnapshotCreationFailed"
	ReasonCheckFailed    = "SnapshotContentCheckandUpdateFailed"
	ReasonDeleteError    = "SnapshotDeleteError"
)

// staleRetry is how soon a worker looks again at a content whose cached copy predates our own write.
const staleRetry = 100 * time.Millisecond

// Snapshotter is the CSI side: the calls the handler makes over the driver's socket.
type Snapshotter interface {
	CreateSnapshot(ctx context.Context, req *csi.CreateSnapshotRequest) (*csi.Snapshot, error)
	DeleteSnapshot(ctx context.Context, req *csi.DeleteSnapshotRequest) error
	GetSnapshot(ctx context.Context, req *csi.ListSnapshotsRequest) (*csi.Snapshot, error)
}

// Common are the settings the snapshot and group handlers share.
type Common struct {
	Driver string
	// Kube reads Secrets; Client patches VolumeSnapshotContents and VolumeGroupSnapshotContents.
	Kube   kubernetes.Interface
	Client snapclient.Interface
	// NamePrefix and NameUUIDLength are --snapshot-name-prefix and --snapshot-name-uuid-length (for groups,
	// --groupsnapshot-name-prefix and --groupsnapshot-name-uuid-length).
	NamePrefix     string
	NameUUIDLength int
	// ExtraCreateMetadata is --extra-create-metadata.
	ExtraCreateMetadata bool
	Events              record.EventRecorder
	// PollInterval is how soon a snapshot that is not ready yet is looked at again.
	PollInterval time.Duration
	// Now stamps creation times and errors; nil means time.Now.
	Now func() time.Time
}

// Config is what the handler needs.
type Config struct {
	Common
	ClassLister snaplisters.VolumeSnapshotClassLister
	CSI         Snapshotter
	// ListSnapshots is the driver's LIST_SNAPSHOTS capability; without it a pre-provisioned snapshot is
	// taken to be ready, as upstream does.
	ListSnapshots bool
}

func (c *Common) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

// Handler syncs VolumeSnapshotContents of one driver.
type Handler struct {
	cfg     Config
	tracker *ownwrites.Writes
}

// New returns a Handler.
func New(cfg Config) *Handler {
	return &Handler{cfg: cfg, tracker: ownwrites.New()}
}

// Sync brings content one step closer to what its spec asks. A positive duration asks the caller to look
// again after it without counting a failure (a snapshot that is not ready yet, or a cache that has not seen
// our own write yet); an error asks for a retry with backoff.
func (h *Handler) Sync(ctx context.Context, content *snapv1.VolumeSnapshotContent) (time.Duration, error) {
	if content.Spec.Driver != h.cfg.Driver {
		return 0, nil
	}
	if h.tracker.Stale(content) {
		return staleRetry, nil
	}
	if content.DeletionTimestamp != nil && released(content) {
		return 0, h.delete(ctx, content)
	}
	_, groupMember := content.Annotations[snapapi.AnnGroupHandle]
	switch {
	case isReady(content):
		// A crash between the status write and the annotation removal leaves the annotation behind.
		_, err := h.removeBeingCreated(ctx, content)
		return 0, err
	case content.Spec.Source.SnapshotHandle != nil:
		return h.refresh(ctx, content)
	case content.Status != nil && content.Status.VolumeGroupSnapshotHandle != nil && content.Status.SnapshotHandle != nil:
		// A member of a group snapshot: the group call created it, ListSnapshots tells when it is ready.
		return h.refresh(ctx, content)
	case content.Spec.Source.VolumeHandle != nil && !groupMember:
		return h.create(ctx, content)
	}
	return 0, nil
}

// Forget drops what the handler remembers about a content that is gone.
func (h *Handler) Forget(uid types.UID) { h.tracker.Forget(uid) }

// released reports whether the snapshot controller (or whoever deleted the content) has let the content's
// snapshot go: upstream's shouldDelete, except that a content whose CreateSnapshot may still be running is
// released too, and delete.go finds out what that call made instead of waiting for it.
func released(c *snapv1.VolumeSnapshotContent) bool {
	if c.Spec.Source.SnapshotHandle != nil && c.Spec.VolumeSnapshotRef.UID == "" {
		return true
	}
	_, deleting := c.Annotations[snapapi.AnnBeingDeleted]
	return deleting
}

func isReady(c *snapv1.VolumeSnapshotContent) bool {
	return c.Status != nil && c.Status.ReadyToUse != nil && *c.Status.ReadyToUse
}

// snapshotHandle is the handle the content's snapshot is known by: status first, then a pre-provisioned
// spec's.
func snapshotHandle(c *snapv1.VolumeSnapshotContent) string {
	if c.Status != nil && c.Status.SnapshotHandle != nil && *c.Status.SnapshotHandle != "" {
		return *c.Status.SnapshotHandle
	}
	if c.Spec.Source.SnapshotHandle != nil {
		return *c.Spec.Source.SnapshotHandle
	}
	return ""
}
