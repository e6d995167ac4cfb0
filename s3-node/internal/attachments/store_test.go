package attachments

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/stowage-csi/stowage/shared/s3api"
)

func att(name string, mutate func(*s3api.MountpointS3PodAttachmentSpec)) *s3api.MountpointS3PodAttachment {
	a := &s3api.MountpointS3PodAttachment{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: s3api.MountpointS3PodAttachmentSpec{
		NodeName: "n1", PersistentVolumeName: "pv", VolumeID: "vol", MountOptions: "--allow-delete", AuthenticationSource: "driver",
		MountpointS3PodAttachments: map[string][]s3api.WorkloadPodAttachment{"mp-" + name: {{WorkloadPodUID: "w"}}},
	}}
	if mutate != nil {
		mutate(&a.Spec)
	}
	return a
}

func TestFind(t *testing.T) {
	driverKey := Key{NodeName: "n1", PVName: "pv", VolumeID: "vol", AuthenticationSource: "driver"}
	podKey := Key{NodeName: "n1", PVName: "pv", VolumeID: "vol", AuthenticationSource: "pod", WorkloadNamespace: "ns", WorkloadServiceAccount: "sa"}
	podAtt := func(s *s3api.MountpointS3PodAttachmentSpec) {
		s.AuthenticationSource, s.WorkloadNamespace, s.WorkloadServiceAccountName, s.WorkloadServiceAccountIAMRoleARN = "pod", "ns", "sa", "arn:x"
	}
	tests := []struct {
		name   string
		atts   []*s3api.MountpointS3PodAttachment
		key    Key
		wantMP string
	}{
		{"match; mount options and role ignored", []*s3api.MountpointS3PodAttachment{att("a", nil)}, driverKey, "mp-a"},
		{"empty auth source means driver", []*s3api.MountpointS3PodAttachment{att("a", func(s *s3api.MountpointS3PodAttachmentSpec) { s.AuthenticationSource = "" })}, driverKey, "mp-a"},
		{"other node", []*s3api.MountpointS3PodAttachment{att("a", func(s *s3api.MountpointS3PodAttachmentSpec) { s.NodeName = "n2" })}, driverKey, ""},
		{"other fsGroup", []*s3api.MountpointS3PodAttachment{att("a", func(s *s3api.MountpointS3PodAttachmentSpec) { s.WorkloadFSGroup = "5" })}, driverKey, ""},
		{"other volume", []*s3api.MountpointS3PodAttachment{att("a", func(s *s3api.MountpointS3PodAttachmentSpec) { s.VolumeID = "v2" })}, driverKey, ""},
		{"workload not listed", []*s3api.MountpointS3PodAttachment{att("a", func(s *s3api.MountpointS3PodAttachmentSpec) {
			s.MountpointS3PodAttachments = map[string][]s3api.WorkloadPodAttachment{"mp-a": {{WorkloadPodUID: "other"}}}
		})}, driverKey, ""},
		{"pod auth matches namespace and SA", []*s3api.MountpointS3PodAttachment{att("a", nil), att("b", podAtt)}, podKey, "mp-b"},
		{"pod auth, other SA", []*s3api.MountpointS3PodAttachment{att("b", podAtt)}, Key{NodeName: "n1", PVName: "pv", VolumeID: "vol", AuthenticationSource: "pod", WorkloadNamespace: "ns", WorkloadServiceAccount: "other"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &Store{List: func() ([]*s3api.MountpointS3PodAttachment, error) { return tt.atts, nil }, Timeout: 30 * time.Millisecond, Poll: 5 * time.Millisecond}
			_, mp, err := s.Find(context.Background(), tt.key, "w")
			if tt.wantMP == "" {
				if !errors.Is(err, ErrNotFound) {
					t.Fatalf("Find = %q, %v; want ErrNotFound", mp, err)
				}
				return
			}
			if err != nil || mp != tt.wantMP {
				t.Fatalf("Find = %q, %v; want %q", mp, err, tt.wantMP)
			}
		})
	}
}

// The controller's attachment may land after the kubelet's publish: Find waits for it.
func TestFindWaitsForTheController(t *testing.T) {
	calls := 0
	s := &Store{List: func() ([]*s3api.MountpointS3PodAttachment, error) {
		calls++
		if calls < 3 {
			return nil, nil
		}
		return []*s3api.MountpointS3PodAttachment{att("a", nil)}, nil
	}, Timeout: 5 * time.Second, Poll: time.Millisecond}
	if _, mp, err := s.Find(context.Background(), Key{NodeName: "n1", PVName: "pv", VolumeID: "vol", AuthenticationSource: "driver"}, "w"); err != nil || mp != "mp-a" {
		t.Fatalf("Find = %q, %v", mp, err)
	}
}

func TestRunningPod(t *testing.T) {
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	_ = idx.Add(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "running", Namespace: "mount-s3"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}})
	_ = idx.Add(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pending", Namespace: "mount-s3"}, Status: corev1.PodStatus{Phase: corev1.PodPending,
		Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: "0/1 nodes: Insufficient memory"}}}})
	s := &Store{Pods: corelisters.NewPodLister(idx).Pods("mount-s3"), Namespace: "mount-s3", Timeout: 30 * time.Millisecond, Poll: 5 * time.Millisecond}
	if p, err := s.RunningPod(context.Background(), "running"); err != nil || p.Name != "running" {
		t.Fatalf("RunningPod(running) = %v, %v", p, err)
	}
	for name, want := range map[string]string{"pending": "mount-s3/pending is not running: it is Pending and unschedulable (0/1 nodes: Insufficient memory)", "missing": "mount-s3/missing is not running: it does not exist"} {
		if _, err := s.RunningPod(context.Background(), name); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("RunningPod(%s) error %v, want %q", name, err, want)
		}
	}
}
