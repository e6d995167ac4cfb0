package kubeclient

import (
	"context"
	"testing"
	"time"

	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
)

func TestInformerFactoryCachesObjectsWithoutManagedFields(t *testing.T) {
	va := &storagev1.VolumeAttachment{ObjectMeta: metav1.ObjectMeta{
		Name:          "csi-1",
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate}},
	}}
	client := fake.NewClientset(va)
	factory := NewInformerFactory(client, 0)
	lister := factory.Storage().V1().VolumeAttachments().Lister()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	factory.Start(ctx.Done())
	defer func() {
		cancel() // stops the informers, which Shutdown waits for
		factory.Shutdown()
	}()
	factory.WaitForCacheSync(ctx.Done())
	got, err := lister.Get("csi-1")
	if err != nil {
		t.Fatal(err)
	}
	if got.ManagedFields != nil {
		t.Errorf("cached VolumeAttachment keeps managed fields %v", got.ManagedFields)
	}
	// The transform drops only managed fields, and leaves non-objects alone.
	if got.Name != "csi-1" {
		t.Errorf("cached object %+v", got.ObjectMeta)
	}
	tomb := cache.DeletedFinalStateUnknown{Key: "csi-1"}
	if out, err := StripManagedFields(tomb); err != nil || out != tomb {
		t.Errorf("StripManagedFields(tombstone) = %v, %v", out, err)
	}
}
