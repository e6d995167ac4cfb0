package controller

import (
	"strconv"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// fresher remembers the objects this controller wrote until its informer has caught up with them. A sync that
// follows a write (the write's own watch event, or an event of another object) would otherwise read the
// version before the write from the cache and send a patch preconditioned on it: a certain 409 and a re-read.
// Upstream keeps a store of its writes for the same reason.
//
// It also remembers the objects this controller's own write deleted (the last finalizer removed): the API
// server answers such a write with the object at its old resourceVersion, so the version alone cannot tell a
// later sync that the cached object is gone, and a patch of it would only get a 404.
type fresher[T metav1.Object] struct {
	mu   sync.Mutex
	m    map[string]T
	gone map[string]types.UID
}

func newFresher[T metav1.Object]() *fresher[T] {
	return &fresher[T]{m: map[string]T{}, gone: map[string]types.UID{}}
}

// deleted records that this controller's write removed the object key with uid.
func (f *fresher[T]) deleted(key string, uid types.UID) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gone[key] = uid
	delete(f.m, key)
}

// isGone reports whether cached is an object this controller's write deleted.
func (f *fresher[T]) isGone(key string, cached T) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	uid, ok := f.gone[key]
	return ok && uid == cached.GetUID()
}

// wrote records obj as the newest version of key.
func (f *fresher[T]) wrote(key string, obj T) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if old, ok := f.m[key]; ok && newer(old, obj) {
		return
	}
	f.m[key] = obj
}

// latest returns what this controller wrote under key if it is newer than cached (from the informer), else
// cached, forgetting the written object once the informer has it.
func (f *fresher[T]) latest(key string, cached T) T {
	f.mu.Lock()
	defer f.mu.Unlock()
	w, ok := f.m[key]
	if !ok {
		return cached
	}
	if newer(w, cached) {
		return w
	}
	delete(f.m, key)
	return cached
}

// get returns what this controller wrote under key, for an object its informer has not shown at all yet.
func (f *fresher[T]) get(key string) (T, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	w, ok := f.m[key]
	return w, ok
}

// forget drops key, for an object the informer no longer has.
func (f *fresher[T]) forget(key string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.m, key)
	delete(f.gone, key)
}

// newer reports whether a's resourceVersion is greater than b's. Versions are etcd revisions, which the API
// server documents as opaque; one that does not parse is never taken as newer, so the cache wins.
func newer(a, b metav1.Object) bool {
	av, errA := strconv.ParseUint(a.GetResourceVersion(), 10, 64)
	bv, errB := strconv.ParseUint(b.GetResourceVersion(), 10, 64)
	return errA == nil && errB == nil && av > bv
}
