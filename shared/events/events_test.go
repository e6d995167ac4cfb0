package events

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/stowage-csi/stowage/shared/testutil"
)

func TestRecorderWritesEvents(t *testing.T) {
	tests := []struct {
		name      string
		obj       *corev1.PersistentVolumeClaim
		eventType string
		reason    string
		wantNS    string
	}{
		{"normal", &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: "apps", UID: "u1"}},
			corev1.EventTypeNormal, "ProvisioningSucceeded", "apps"},
		{"warning", &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "logs", Namespace: "ops", UID: "u2"}},
			corev1.EventTypeWarning, "ProvisioningFailed", "ops"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := fake.NewClientset()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			r, err := New(ctx, client, Options{Component: "csi-provisioner"})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Shutdown()
			r.Eventf(tt.obj, tt.eventType, tt.reason, "volume %s", "pvc-1")

			var got *corev1.Event
			testutil.Eventually(t, 30*time.Second, "an Event written", func() (bool, error) {
				list, err := client.CoreV1().Events(tt.wantNS).List(ctx, metav1.ListOptions{})
				if err != nil || len(list.Items) == 0 {
					return false, err
				}
				got = &list.Items[0]
				return true, nil
			})
			if got.Reason != tt.reason || got.Type != tt.eventType || got.Message != "volume pvc-1" ||
				got.Source.Component != "csi-provisioner" || got.InvolvedObject.Name != tt.obj.Name {
				t.Errorf("event = reason %q type %q message %q source %q object %q", got.Reason, got.Type, got.Message,
					got.Source.Component, got.InvolvedObject.Name)
			}
		})
	}
}

func TestRecorderNeedsComponent(t *testing.T) {
	if _, err := New(context.Background(), fake.NewClientset(), Options{}); err == nil {
		t.Fatal("New without a component succeeded")
	}
}
