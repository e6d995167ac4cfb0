package handler

import (
	"sync"

	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/types"
)

// writeTracker remembers which resourceVersions of a VolumeAttachment our own writes have superseded.
// A worker that finds one of them in the informer cache knows the cache has not caught up with the
// write yet, and waits instead of repeating the work: without this, the watch event of the finalizer
// patch re-queues the object, the worker sees a copy without the status written a moment ago, and
// publishes (or unpublishes, kubernetes-csi/external-attacher#587) and writes a second time.
type writeTracker struct {
	mu         sync.Mutex
	superseded map[types.UID]map[string]struct{}
}

func newWriteTracker() *writeTracker {
	return &writeTracker{superseded: map[types.UID]map[string]struct{}{}}
}

// wrote records that we replaced version oldRV of the object with uid.
func (t *writeTracker) wrote(uid types.UID, oldRV string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	set := t.superseded[uid]
	if set == nil {
		set = map[string]struct{}{}
		t.superseded[uid] = set
	}
	set[oldRV] = struct{}{}
}

// wroteIfChanged records a write when a patch helper returned a new version of before (the helpers send
// nothing, and return before itself, when there is nothing to change).
func (t *writeTracker) wroteIfChanged(before, after *storagev1.VolumeAttachment) {
	if after != nil && after.ResourceVersion != before.ResourceVersion {
		t.wrote(before.UID, before.ResourceVersion)
	}
}

// stale reports whether va is a copy our own writes have already replaced. Seeing any other version
// means the cache caught up, and the record is dropped.
func (t *writeTracker) stale(va *storagev1.VolumeAttachment) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	set, ok := t.superseded[va.UID]
	if !ok {
		return false
	}
	if _, old := set[va.ResourceVersion]; old {
		return true
	}
	delete(t.superseded, va.UID)
	return false
}

// forget drops what is known about a deleted object.
func (t *writeTracker) forget(uid types.UID) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.superseded, uid)
}
