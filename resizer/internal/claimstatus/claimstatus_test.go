package claimstatus

import (
	"context"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stowage-csi/stowage/shared/ownwrites"
	"github.com/stowage-csi/stowage/shared/testutil"
)

func TestWrite(t *testing.T) {
	pvc := &v1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c", UID: "u1"}}
	kube := testutil.NewClientset(pvc)
	ctx := context.Background()
	cached, err := kube.CoreV1().PersistentVolumeClaims("ns").Get(ctx, "c", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	writes := ownwrites.New()
	got, err := Write(ctx, kube, writes, cached, func(c *v1.PersistentVolumeClaim) { c.Status.Phase = v1.ClaimBound })
	if err != nil || got.Status.Phase != v1.ClaimBound {
		t.Fatalf("Write = %v, %v; want the claim with its new status", got, err)
	}
	if !writes.Stale(cached) {
		t.Error("the version the write replaced is not recorded as stale")
	}
	missing := &v1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "gone", UID: "u2", ResourceVersion: "1"}}
	if got, err := Write(ctx, kube, writes, missing, func(c *v1.PersistentVolumeClaim) { c.Status.Phase = v1.ClaimBound }); err == nil || got != missing {
		t.Errorf("a claim that is gone: %v, %v; want the claim as it was and an error", got, err)
	}
}
