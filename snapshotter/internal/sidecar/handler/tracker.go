package handler

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// writeTracker remembers which resourceVersions of a content our own writes have superseded. A worker that
// finds one of them in the informer cache knows the cache has not caught up with the write yet and waits,
// instead of acting on the old copy: without this, the watch event of the being-created patch re-queues the
// content, the worker sees a copy without the status written a moment ago, and calls CreateSnapshot and
// patches (with a stale resourceVersion, so a 409) a second time.
type writeTracker struct {
	mu         sync.Mutex
	superseded map[types.UID]map[string]struct{}
}

func newWriteTracker() *writeTracker {
	return &writeTracker{superseded: map[types.UID]map[string]struct{}{}}
}

// wrote records that a write replaced version oldRV of the object with uid by newRV; no-op writes (the patch
// helpers send nothing and return the object itself) leave the version as it was and are not recorded.
func (t *writeTracker) wrote(uid types.UID, oldRV, newRV string) {
	if oldRV == newRV {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	set := t.superseded[uid]
	if set == nil {
		set = map[string]struct{}{}
		t.superseded[uid] = set
	}
	set[oldRV] = struct{}{}
}

// stale reports whether version rv of the object with uid is one our own writes have replaced. Seeing any
// other version means the cache caught up, and the record is dropped.
func (t *writeTracker) stale(uid types.UID, rv string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	set, ok := t.superseded[uid]
	if !ok {
		return false
	}
	if _, old := set[rv]; old {
		return true
	}
	delete(t.superseded, uid)
	return false
}

func (t *writeTracker) forget(uid types.UID) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.superseded, uid)
}
