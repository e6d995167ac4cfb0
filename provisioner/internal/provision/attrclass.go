package provision

import (
	"context"
	"sync"
	"time"

	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// attrClassTTL is how long a VolumeAttributesClass read is reused. A class's driverName and parameters are
// immutable, so a cached copy can only be wrong about a class deleted and created again under the same name.
const attrClassTTL = time.Minute

// attrClassCache reads VolumeAttributesClasses with direct GETs, as upstream does: upstream's RBAC grants get
// on them, not list or watch, so a drop-in cannot run an informer. Each answer is kept for a while so that a
// burst of claims naming one class costs one GET. Errors are not kept: a missing class may be created any time.
type attrClassCache struct {
	get func(ctx context.Context, name string, opts metav1.GetOptions) (*storagev1.VolumeAttributesClass, error)
	ttl time.Duration
	now func() time.Time

	mu      sync.Mutex
	entries map[string]attrClassEntry
}

type attrClassEntry struct {
	class   *storagev1.VolumeAttributesClass
	expires time.Time
}

func newAttrClassCache(get func(context.Context, string, metav1.GetOptions) (*storagev1.VolumeAttributesClass, error), ttl time.Duration, now func() time.Time) *attrClassCache {
	return &attrClassCache{get: get, ttl: ttl, now: now, entries: map[string]attrClassEntry{}}
}

// Get returns the class, from the cache while its copy is fresh. The result is shared: callers must not modify it.
func (c *attrClassCache) Get(ctx context.Context, name string) (*storagev1.VolumeAttributesClass, error) {
	now := c.now()
	c.mu.Lock()
	e, ok := c.entries[name]
	if ok && now.After(e.expires) {
		delete(c.entries, name)
		ok = false
	}
	c.mu.Unlock()
	if ok {
		return e.class, nil
	}
	// Two workers may both miss and both GET; that is cheaper than holding the lock across a request.
	vac, err := c.get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.entries[name] = attrClassEntry{class: vac, expires: now.Add(c.ttl)}
	c.mu.Unlock()
	return vac, nil
}
