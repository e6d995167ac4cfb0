package ownwrites

import (
	"strconv"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Latest remembers the objects a controller wrote until its informer has caught up with them. A sync that
// follows a write (the write's own watch event, or an event of another object) would otherwise read the
// version before the write from the cache and send a patch preconditioned on it: a certain 409 and a re-read.
//
// It also remembers the objects the controller's own write deleted (the last finalizer removed): the API
// server answers such a write with the object at its old resourceVersion, so the version alone cannot tell a
// later sync that the cached object is gone, and a patch of it would only get a 404. Safe for concurrent use.
type Latest[T metav1.Object] struct {
	mu   sync.Mutex
	m    map[string]T
	gone map[string]types.UID
}

// NewLatest returns an empty store.
func NewLatest[T metav1.Object]() *Latest[T] {
	return &Latest[T]{m: map[string]T{}, gone: map[string]types.UID{}}
}

// Deleted records that the controller's write removed the object key with uid.
func (l *Latest[T]) Deleted(key string, uid types.UID) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.gone[key] = uid
	delete(l.m, key)
}

// IsGone reports whether cached is an object the controller's write deleted.
func (l *Latest[T]) IsGone(key string, cached T) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	uid, ok := l.gone[key]
	return ok && uid == cached.GetUID()
}

// Wrote records obj as the newest version of key; an older answer arriving late does not replace a newer one.
func (l *Latest[T]) Wrote(key string, obj T) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if old, ok := l.m[key]; ok && newer(old, obj) {
		return
	}
	l.m[key] = obj
}

// Of returns what the controller wrote under key if it is newer than cached (from the informer), else cached,
// forgetting the written object once the informer has it.
func (l *Latest[T]) Of(key string, cached T) T {
	l.mu.Lock()
	defer l.mu.Unlock()
	w, ok := l.m[key]
	if !ok {
		return cached
	}
	if newer(w, cached) {
		return w
	}
	delete(l.m, key)
	return cached
}

// Get returns what the controller wrote under key, for an object its informer has not shown at all yet.
func (l *Latest[T]) Get(key string) (T, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	w, ok := l.m[key]
	return w, ok
}

// Forget drops key, for an object the informer no longer has.
func (l *Latest[T]) Forget(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.m, key)
	delete(l.gone, key)
}

// newer reports whether a's resourceVersion is greater than b's. Versions are etcd revisions, which the API
// server documents as opaque; one that does not parse is never taken as newer, so the cache wins.
func newer(a, b metav1.Object) bool {
	av, errA := strconv.ParseUint(a.GetResourceVersion(), 10, 64)
	bv, errB := strconv.ParseUint(b.GetResourceVersion(), 10, 64)
	return errA == nil && errB == nil && av > bv
}
