package taint

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/stowage-csi/stowage/shared/s3api"
)

func node(taints ...corev1.Taint) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", ResourceVersion: "1"}, Spec: corev1.NodeSpec{Taints: taints}}
}

func csiNode(drivers ...string) *storagev1.CSINode {
	c := &storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
	for _, d := range drivers {
		c.Spec.Drivers = append(c.Spec.Drivers, storagev1.CSINodeDriver{Name: d, NodeID: "n1"})
	}
	return c
}

func TestRemove(t *testing.T) {
	notReady := corev1.Taint{Key: s3api.TaintAgentNotReady, Effect: corev1.TaintEffectNoExecute}
	other := corev1.Taint{Key: "other", Effect: corev1.TaintEffectNoSchedule}
	tests := []struct {
		name       string
		objs       []runtime.Object
		wantErr    bool
		wantTaints []corev1.Taint
		wantPatch  bool
	}{
		{name: "registered: removed, others kept", objs: []runtime.Object{node(notReady, other), csiNode("ebs.csi.aws.com", s3api.DriverName)},
			wantTaints: []corev1.Taint{other}, wantPatch: true},
		{name: "no taint: no write", objs: []runtime.Object{node(other)}, wantTaints: []corev1.Taint{other}},
		{name: "not registered: kept, gives up", objs: []runtime.Object{node(notReady), csiNode("ebs.csi.aws.com")}, wantErr: true, wantTaints: []corev1.Taint{notReady}},
		{name: "no CSINode: kept, gives up", objs: []runtime.Object{node(notReady)}, wantErr: true, wantTaints: []corev1.Taint{notReady}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := fake.NewClientset(tt.objs...)
			err := Remove(context.Background(), Config{Client: client, NodeName: "n1", Backoff: wait.Backoff{Duration: time.Millisecond, Steps: 3}})
			if (err != nil) != tt.wantErr {
				t.Fatalf("Remove: %v, want error %v", err, tt.wantErr)
			}
			n, _ := client.CoreV1().Nodes().Get(context.Background(), "n1", metav1.GetOptions{})
			if len(n.Spec.Taints) != len(tt.wantTaints) || (len(tt.wantTaints) > 0 && n.Spec.Taints[0].Key != tt.wantTaints[0].Key) {
				t.Errorf("taints = %v, want %v", n.Spec.Taints, tt.wantTaints)
			}
			patched := false
			for _, a := range client.Actions() {
				if a.GetVerb() == "patch" {
					patched = true
				}
			}
			if patched != tt.wantPatch {
				t.Errorf("patched = %v, want %v", patched, tt.wantPatch)
			}
		})
	}
}
