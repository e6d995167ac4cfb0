package reconciler

import (
	"context"
	"fmt"
	"slices"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stowage-csi/stowage/shared/s3api"
)

// findAttachment returns the attachment of a sharing key, or nil. An attachment this process created that
// the cache has not shown yet is read from the API server, so informer lag never makes a second one; if
// the API server no longer has it either, the expectation is dropped and the key is free again (upstream,
// awslabs/mountpoint-s3-csi-driver#843, kept requeuing "creation is pending" forever). Duplicates are merged
// into one.
func (r *Reconciler) findAttachment(ctx context.Context, key string) (*s3api.MountpointS3PodAttachment, error) {
	list := &s3api.MountpointS3PodAttachmentList{}
	if err := r.client.List(ctx, list, client.MatchingFields{indexSharingKey: key}); err != nil {
		return nil, fmt.Errorf("list attachments: %w", err)
	}
	items := list.Items
	if pending := r.expect.pending(key); pending != "" {
		if slices.ContainsFunc(items, func(a s3api.MountpointS3PodAttachment) bool { return a.Name == pending }) {
			r.expect.clear(key, pending)
		} else {
			live := &s3api.MountpointS3PodAttachment{}
			err := r.reader.Get(ctx, types.NamespacedName{Name: pending}, live)
			switch {
			case apierrors.IsNotFound(err):
				r.expect.clear(key, pending)
			case err != nil:
				return nil, fmt.Errorf("get attachment %s: %w", pending, err)
			default:
				items = append(items, *live)
			}
		}
	}
	switch len(items) {
	case 0:
		return nil, nil
	case 1:
		return &items[0], nil
	}
	return r.mergeDuplicates(ctx, items)
}

// mergeDuplicates keeps the oldest attachment of a key, moves the others' Mountpoint Pods and workloads into
// it (one update, preconditioned on its resourceVersion), then deletes the others (each preconditioned on its resourceVersion).
// Duplicates come from crashes of older controllers, from upstream and Stowage both running during a swap,
// and from upstream's order-sensitive keys ("a,b" and "b,a"), which Stowage treats as one.
func (r *Reconciler) mergeDuplicates(ctx context.Context, items []s3api.MountpointS3PodAttachment) (*s3api.MountpointS3PodAttachment, error) {
	slices.SortFunc(items, func(a, b s3api.MountpointS3PodAttachment) int {
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		return compareStrings(a.Name, b.Name)
	})
	keep := items[0].DeepCopy()
	next := keep.DeepCopy()
	if next.Spec.MountpointS3PodAttachments == nil {
		next.Spec.MountpointS3PodAttachments = map[string][]s3api.WorkloadPodAttachment{}
	}
	changed := false
	for _, dup := range items[1:] {
		for mp, ws := range dup.Spec.MountpointS3PodAttachments {
			for _, w := range ws {
				if next.MountpointPodFor(w.WorkloadPodUID) != "" {
					continue
				}
				next.Spec.MountpointS3PodAttachments[mp] = append(next.Spec.MountpointS3PodAttachments[mp], w)
				changed = true
			}
		}
	}
	if changed {
		if err := r.client.Update(ctx, next); err != nil {
			return nil, fmt.Errorf("merge duplicate attachments into %s: %w", keep.Name, err)
		}
	}
	for i := range items[1:] {
		dup := &items[i+1]
		if err := r.deleteAttachment(ctx, dup); err != nil {
			return nil, err
		}
		klog.FromContext(ctx).Info("Merged duplicate attachment", "kept", keep.Name, "deleted", dup.Name)
	}
	return next, nil
}

// deleteAttachment deletes an attachment if it is still the version read; gone already is fine.
func (r *Reconciler) deleteAttachment(ctx context.Context, a *s3api.MountpointS3PodAttachment) error {
	rv := a.ResourceVersion
	err := r.client.Delete(ctx, a, client.Preconditions{ResourceVersion: &rv})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete attachment %s: %w", a.Name, err)
	}
	return nil
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// expectations remember, per sharing key, the attachment this process created last, until the cache shows
// it or the API server says it is gone.
type expectations struct {
	mu    sync.Mutex
	byKey map[string]string
}

func (e *expectations) created(key, name string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.byKey == nil {
		e.byKey = map[string]string{}
	}
	e.byKey[key] = name
}

func (e *expectations) pending(key string) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.byKey[key]
}

func (e *expectations) clear(key, name string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.byKey[key] == name {
		delete(e.byKey, key)
	}
}

// keyedMutex serializes work on one sharing key, so concurrent workers never create two attachments or
// two Mountpoint Pods for workloads that should share.
type keyedMutex struct {
	mu    sync.Mutex
	locks map[string]*keyLock
}

type keyLock struct {
	mu    sync.Mutex
	users int
}

func (k *keyedMutex) lock(key string) (unlock func()) {
	k.mu.Lock()
	if k.locks == nil {
		k.locks = map[string]*keyLock{}
	}
	l := k.locks[key]
	if l == nil {
		l = &keyLock{}
		k.locks[key] = l
	}
	l.users++
	k.mu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		k.mu.Lock()
		if l.users--; l.users == 0 {
			delete(k.locks, key)
		}
		k.mu.Unlock()
	}
}

// clone copies the expectations (tests hand them to a second reconciler on the same store).
func (e *expectations) clone() *expectations {
	e.mu.Lock()
	defer e.mu.Unlock()
	c := &expectations{byKey: map[string]string{}}
	for k, v := range e.byKey {
		c.byKey[k] = v
	}
	return c
}
