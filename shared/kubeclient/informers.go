package kubeclient

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
)

// StripManagedFields is an informer transform that drops metadata.managedFields before an object enters
// the cache. The sidecars never read them, and they are often the largest part of a cached object's
// metadata. Sidecars write with patches, so a cached object without them never sends them back.
func StripManagedFields(o any) (any, error) {
	if m, ok := o.(metav1.Object); ok {
		m.SetManagedFields(nil)
	}
	return o, nil
}

// NewInformerFactory is informers.NewSharedInformerFactory whose every informer strips managed fields.
func NewInformerFactory(client kubernetes.Interface, resync time.Duration) informers.SharedInformerFactory {
	return informers.NewSharedInformerFactoryWithOptions(client, resync, informers.WithTransform(StripManagedFields))
}
