// Package ownwrites remembers what a controller's own writes did, for the window in which its informer cache
// has not caught up with them yet. Two strategies serve the Stowage binaries: Writes marks the versions a write
// replaced, so a worker that reads one of them from the cache waits for the cache instead of repeating the work
// (the sidecars, which act on what they read); Latest keeps the written object itself, so a sync reads it
// instead of the older cached copy (snapshot-controller, which patches what it reads).
package ownwrites

import (
	"reflect"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Writes remembers which resourceVersions of each object our own writes have replaced. Without it, the watch
// event of a controller's first write (a finalizer, a status patch) re-queues the object, the worker sees a
// copy without the write made a moment ago, calls the driver a second time and sends a patch preconditioned
// on the old version: a certain conflict. Safe for concurrent use.
type Writes struct {
	mu         sync.Mutex
	superseded map[types.UID]map[string]struct{}
}

// New returns an empty tracker.
func New() *Writes {
	return &Writes{superseded: map[types.UID]map[string]struct{}{}}
}

// Wrote records that after replaced before, when a write happened: the patch helpers return the object itself,
// with the same resourceVersion, when they had nothing to send, and a failed write returns nil.
func (w *Writes) Wrote(before, after metav1.Object) {
	if isNil(after) || isNil(before) || after.GetResourceVersion() == before.GetResourceVersion() {
		return
	}
	w.Superseded(before.GetUID(), before.GetResourceVersion())
}

// Superseded records that a write replaced version rv of the object with uid, for a write whose answer is not
// at hand (a finalizer removal that may have deleted the object).
func (w *Writes) Superseded(uid types.UID, rv string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	set := w.superseded[uid]
	if set == nil {
		set = map[string]struct{}{}
		w.superseded[uid] = set
	}
	set[rv] = struct{}{}
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

// isNil reports whether o is nil, including a typed nil pointer (a failed patch's *VolumeAttachment), which
// compares unequal to a nil interface and would panic on GetResourceVersion.
func isNil(o metav1.Object) bool {
	if o == nil {
		return true
	}
	v := reflect.ValueOf(o)
	return v.Kind() == reflect.Pointer && v.IsNil()
}
