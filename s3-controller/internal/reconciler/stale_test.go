package reconciler

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stowage-csi/stowage/shared/s3api"
)

func TestStaleCleaner(t *testing.T) {
	live := workload("live", "pv")
	a := attachmentWith("s3pa-1", map[string][]string{"mp-1": {"uid-gone-old", "uid-live"}, "mp-2": {"uid-gone-young"}})
	a.Spec.MountpointS3PodAttachments["mp-2"][0].AttachmentTime = metav1.NewTime(testNow.Add(-30 * time.Second))
	live.UID = "uid-live"
	gone := attachmentWith("s3pa-2", map[string][]string{"mp-3": {"uid-gone-2"}})
	orphanOld := existingMP("mp-orphan", func(p *corev1.Pod) { p.CreationTimestamp = metav1.NewTime(testNow.Add(-time.Hour)) })
	orphanYoung := existingMP("mp-young", func(p *corev1.Pod) { p.CreationTimestamp = metav1.NewTime(testNow.Add(-time.Second)) })
	e := newEnv(t, live, a, gone, existingMP("mp-1", nil), existingMP("mp-2", nil), existingMP("mp-3", nil), orphanOld, orphanYoung)
	if err := e.r.CleanStale(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := uidsByMountpointPod(e.attachments())
	if len(got["mp-1"]) != 1 || got["mp-1"][0] != "uid-live" || len(got["mp-2"]) != 1 || len(got) != 2 {
		t.Fatalf("after cleaning: %v; want mp-1 [uid-live], mp-2 [uid-gone-young] (too young to judge)", got)
	}
	for name, want := range map[string]string{"mp-1": "", "mp-2": "", "mp-3": "true", "mp-orphan": "true", "mp-young": ""} {
		if got := e.pod(testNS, name).Annotations[s3api.AnnotationNeedsUnmount]; got != want {
			t.Errorf("%s needs-unmount %q, want %q", name, got, want)
		}
	}
}
