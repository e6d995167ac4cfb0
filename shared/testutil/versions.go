package testutil

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
)

// AddResourceVersions gives any generated fake clientset, such as a CRD clientset's, the resourceVersion checks
// NewClientset adds to client-go's: pass its embedded Fake and its Tracker, and the seed objects, which are
// stored with versions through it (seed them here, not in the fake's constructor).
func AddResourceVersions(f *k8stesting.Fake, tracker k8stesting.ObjectTracker, objects ...runtime.Object) error {
	v := &versioned{tracker: tracker, apply: k8stesting.ObjectReaction(tracker)}
	for _, o := range objects {
		o = o.DeepCopyObject()
		m, err := meta.Accessor(o)
		if err != nil {
			return fmt.Errorf("seed object %T: %w", o, err)
		}
		m.SetResourceVersion(v.next())
		if err := tracker.Add(o); err != nil {
			return fmt.Errorf("seeding %s: %w", m.GetName(), err)
		}
	}
	f.PrependReactor("*", "*", v.react)
	return nil
}
