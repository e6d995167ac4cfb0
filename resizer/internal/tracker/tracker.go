// Package tracker remembers which resourceVersions of an object the resizer's own writes have replaced, so a
// worker that reads an older copy from the informer cache waits for the cache instead of repeating the work.
// Without it, the watch event of the first status patch re-queues the claim, the worker sees the claim as it
// was before the CSI call finished and calls the driver again, and its next preconditioned write fails with a
// conflict.
package tracker

import (
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Writes is safe for concurrent use.
type Writes struct {
	mu         sync.Mutex
	superseded map[types.UID]map[string]struct{}
}

// New returns an empty tracker.
func New() *Writes {
	return &Writes{superseded: map[types.UID]map[string]struct{}{}}
}

// Wrote records that after replaced before, when a write happened (the patch helpers return the object
// itself, with the same resourceVersion, when they had nothing to send).
func (w *Writes) Wrote(before, after metav1.Object) {
	if after == nil || before == nil || after.GetResourceVersion() == before.GetResourceVersion() {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	set := w.superseded[before.GetUID()]
	if set == nil {
		set = map[string]struct{}{}
		w.superseded[before.GetUID()] = set
	}
	set[before.GetResourceVersion()] = struct{}{}
}

// Stale reports whether obj is a copy our own writes have already replaced. Any other version means the cache
// caught up, and what was recorded for the object is dropped.
func (w *Writes) Stale(obj metav1.Object) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	set, ok := w.superseded[obj.GetUID()]
	if !ok {
		return false
	}
	if _, old := set[obj.GetResourceVersion()]; old {
		return true
	}
	delete(w.superseded, obj.GetUID())
	return false
}

// Forget drops what is known about a deleted object.
func (w *Writes) Forget(uid types.UID) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.superseded, uid)
}
