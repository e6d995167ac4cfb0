package reconciler

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stowage-csi/stowage/shared/s3api"
)

// existingMP is a Mountpoint Pod already in an attachment, for the assignment rules.
func existingMP(name string, mutate func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: name,
		Labels:      map[string]string{s3api.LabelMountedByVersion: testVersion},
		Annotations: map[string]string{AnnotationAccess: string(ReadWrite)}}}
	if mutate != nil {
		mutate(p)
	}
	return p
}

func attachmentWith(name string, mps map[string][]string) *s3api.MountpointS3PodAttachment {
	a := &s3api.MountpointS3PodAttachment{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: s3api.MountpointS3PodAttachmentSpec{NodeName: testNode, PersistentVolumeName: "pv", VolumeID: "pv-handle",
			AuthenticationSource: "driver", MountpointS3PodAttachments: map[string][]s3api.WorkloadPodAttachment{}}}
	for mp, uids := range mps {
		a.Spec.MountpointS3PodAttachments[mp] = []s3api.WorkloadPodAttachment{}
		for _, uid := range uids {
			a.Spec.MountpointS3PodAttachments[mp] = append(a.Spec.MountpointS3PodAttachments[mp],
				s3api.WorkloadPodAttachment{WorkloadPodUID: uid, AttachmentTime: metav1.NewTime(testNow.Add(-time.Hour))})
		}
	}
	return a
}

func TestAssignmentRules(t *testing.T) {
	tests := []struct {
		name     string
		mp       func(*corev1.Pod)
		wantJoin bool
	}{
		{"same version and access: joins", nil, true},
		{"older controller version: new Mountpoint Pod", func(p *corev1.Pod) { p.Labels[s3api.LabelMountedByVersion] = "v-old" }, false},
		{"needs-unmount: new Mountpoint Pod", func(p *corev1.Pod) { p.Annotations[s3api.AnnotationNeedsUnmount] = "true" }, false},
		{"no-new-workload: new Mountpoint Pod", func(p *corev1.Pod) { p.Annotations[s3api.AnnotationNoNewWorkload] = "true" }, false},
		{"read-only Mountpoint Pod, read-write workload: new", func(p *corev1.Pod) { p.Annotations[AnnotationAccess] = string(ReadOnly) }, false},
		{"no access annotation (upstream's): new", func(p *corev1.Pod) { delete(p.Annotations, AnnotationAccess) }, false},
		{"succeeded: new", func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := workload("b", "pv")
			objs := append(volumeObjs("pv", nil), w, existingMP("mp-old", tt.mp), attachmentWith("s3pa-1", map[string][]string{"mp-old": {"uid-a"}}))
			e := newEnv(t, objs...)
			e.mustReconcile(w)
			as := e.attachments()
			if len(as) != 1 {
				t.Fatalf("%d attachments, want the existing one only", len(as))
			}
			mp := as[0].MountpointPodFor("uid-b")
			if joined := mp == "mp-old"; joined != tt.wantJoin {
				t.Fatalf("workload assigned to %q, want join=%v", mp, tt.wantJoin)
			}
			if !tt.wantJoin && (e.pod(testNS, mp) == nil || !strings.HasPrefix(mp, "mp-")) {
				t.Fatalf("new Mountpoint Pod %q not created", mp)
			}
		})
	}
}

func TestInactiveWorkloadCleanup(t *testing.T) {
	a, b := workload("a", "pv"), workload("b", "pv")
	e := newEnv(t, append(volumeObjs("pv", nil), a, b)...)
	e.mustReconcile(a, b)
	mp := e.attachments()[0].MountpointPodFor("uid-a")

	e.setPhase(a, corev1.PodSucceeded)
	e.mustReconcile(e.pod("default", "a"))
	if got := uidsByMountpointPod(e.attachments())[mp]; len(got) != 1 || got[0] != "uid-b" {
		t.Fatalf("after a finished: %v, want [uid-b]", got)
	}
	if e.pod(testNS, mp).Annotations[s3api.AnnotationNeedsUnmount] != "" {
		t.Fatal("Mountpoint Pod annotated needs-unmount while b still uses it")
	}

	e.setPhase(b, corev1.PodFailed)
	e.mustReconcile(e.pod("default", "b"))
	if got := e.pod(testNS, mp).Annotations[s3api.AnnotationNeedsUnmount]; got != "true" {
		t.Fatalf("needs-unmount = %q, want true", got)
	}
	if as := e.attachments(); len(as) != 0 {
		t.Fatalf("empty attachment not deleted: %+v", as)
	}

	// The node unmounts, Mountpoint exits 0: the controller deletes the Pod.
	e.setPhase(e.pod(testNS, mp), corev1.PodSucceeded)
	e.mustReconcile(e.pod(testNS, mp))
	if e.pod(testNS, mp) != nil {
		t.Fatal("succeeded Mountpoint Pod not deleted")
	}
}

func TestTerminatingWorkloadActivity(t *testing.T) {
	now := metav1.Now()
	for _, tt := range []struct {
		phase  corev1.PodPhase
		active bool
	}{{corev1.PodRunning, true}, {corev1.PodPending, false}, {corev1.PodSucceeded, false}} {
		p := workload("a", "pv", withPhase(tt.phase))
		p.DeletionTimestamp = &now
		if got := isActive(p); got != tt.active {
			t.Errorf("terminating %s: active %v, want %v", tt.phase, got, tt.active)
		}
	}
}

func TestDeletedWorkloadRemovedAtOnce(t *testing.T) {
	a := workload("a", "pv")
	e := newEnv(t, append(volumeObjs("pv", nil), a)...)
	e.mustReconcile(a)
	mp := e.attachments()[0].MountpointPodFor("uid-a")
	if err := e.c.Delete(context.Background(), e.pod("default", "a")); err != nil {
		t.Fatal(err)
	}
	e.mustReconcile(a) // the Delete event's request carries the UID
	if as := e.attachments(); len(as) != 0 {
		t.Fatalf("attachment of a deleted workload kept: %+v", as)
	}
	if e.pod(testNS, mp).Annotations[s3api.AnnotationNeedsUnmount] != "true" {
		t.Fatal("Mountpoint Pod not asked to unmount")
	}
}

func TestFailedMountpointPodReported(t *testing.T) {
	mp := existingMP("mp-x", func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed; p.Status.Reason = "Evicted" })
	e := newEnv(t, mp)
	e.mustReconcile(mp)
	if e.pod(testNS, "mp-x") == nil {
		t.Fatal("failed Mountpoint Pod deleted; upstream only reports it")
	}
	select {
	case ev := <-e.events.Events:
		if !strings.Contains(ev, "MountpointPodFailed") || !strings.Contains(ev, "Evicted") {
			t.Fatalf("event %q", ev)
		}
	default:
		t.Fatal("no Event for the failed Mountpoint Pod")
	}
}

func TestRepairMissingMountpointPod(t *testing.T) {
	a := workload("a", "pv")
	e := newEnv(t, append(volumeObjs("pv", nil), a)...)
	e.mustReconcile(a)
	mp := e.attachments()[0].MountpointPodFor("uid-a")
	old := e.pod(testNS, mp)
	if err := e.c.Delete(context.Background(), old); err != nil {
		t.Fatal(err)
	}
	e.mustReconcile(a)
	again := e.pod(testNS, mp)
	if again == nil {
		t.Fatal("deleted Mountpoint Pod of an active workload not created again (awslabs/mountpoint-s3-csi-driver#843)")
	}
	if len(e.mountpointPods()) != 1 || e.attachments()[0].MountpointPodFor("uid-a") != mp {
		t.Fatal("repair changed the attachment or made a second Mountpoint Pod")
	}
}

func TestDuplicateAttachmentsMerged(t *testing.T) {
	older := attachmentWith("s3pa-old", map[string][]string{"mp-1": {"uid-x"}})
	older.Spec.MountOptions = "a,b"
	older.CreationTimestamp = metav1.NewTime(testNow.Add(-2 * time.Hour))
	newer := attachmentWith("s3pa-new", map[string][]string{"mp-2": {"uid-y"}})
	newer.Spec.MountOptions = "b,a" // upstream's order-sensitive key made two; Stowage's makes one
	newer.CreationTimestamp = metav1.NewTime(testNow.Add(-time.Hour))
	w := workload("w", "pv")
	objs := append(volumeObjs("pv", []string{"b", "a"}), w, older, newer, existingMP("mp-1", nil), existingMP("mp-2", nil))
	e := newEnv(t, objs...)
	e.mustReconcile(w)
	as := e.attachments()
	if len(as) != 1 || as[0].Name != "s3pa-old" {
		t.Fatalf("attachments %v, want s3pa-old only", as)
	}
	got := uidsByMountpointPod(as)
	if len(got["mp-1"]) != 2 || len(got["mp-2"]) != 1 || got["mp-2"][0] != "uid-y" {
		t.Fatalf("merged map %v", got)
	}
}

func TestCreatedAttachmentNotYetInCache(t *testing.T) {
	a, b := workload("a", "pv"), workload("b", "pv")
	e := newEnv(t, append(volumeObjs("pv", nil), a, b)...)
	e.mustReconcile(a)
	created := e.attachments()[0].Name
	// The cache has not seen the attachment a's reconcile created: b must still join it.
	lag := &lagging{Client: e.c, hidden: map[string]bool{created: true}}
	r := e.reconciler(lag, e.c)
	r.expect = e.r.expect.clone()
	if _, err := r.Reconcile(context.Background(), Request{NamespacedName: client.ObjectKeyFromObject(b), UID: b.UID}); err != nil {
		t.Fatal(err)
	}
	if as := e.attachments(); len(as) != 1 || len(e.mountpointPods()) != 1 {
		t.Fatalf("%d attachments, %d Mountpoint Pods after cache lag, want 1, 1", len(as), len(e.mountpointPods()))
	}
}

func TestExpectationOfDeletedAttachmentIsDropped(t *testing.T) {
	a := workload("a", "pv")
	e := newEnv(t, append(volumeObjs("pv", nil), a)...)
	e.mustReconcile(a)
	if err := e.c.Delete(context.Background(), &e.attachments()[0]); err != nil {
		t.Fatal(err)
	}
	// The attachment vanished before the cache saw it (upstream, awslabs/mountpoint-s3-csi-driver#843, requeued
	// "creation is pending" forever).
	e.mustReconcile(a)
	if as := e.attachments(); len(as) != 1 || as[0].MountpointPodFor("uid-a") == "" {
		t.Fatalf("workload not attached again: %+v", as)
	}
}

func TestUnboundClaimRequeues(t *testing.T) {
	objs := volumeObjs("pv", nil, func(_ *corev1.PersistentVolume, pvc *corev1.PersistentVolumeClaim) {
		pvc.Status.Phase = corev1.ClaimPending
	})
	a := workload("a", "pv")
	e := newEnv(t, append(objs, a)...)
	res, err := e.r.Reconcile(context.Background(), Request{NamespacedName: client.ObjectKeyFromObject(a), UID: a.UID})
	if err != nil || res.RequeueAfter == 0 {
		t.Fatalf("result %+v, %v; want a requeue", res, err)
	}
	if len(e.attachments()) != 0 {
		t.Fatal("attachment for an unbound claim")
	}
}

func TestRunningWorkloadWithoutAttachmentIsLegacy(t *testing.T) {
	a := workload("a", "pv", withPhase(corev1.PodRunning))
	e := newEnv(t, append(volumeObjs("pv", nil), a)...)
	e.mustReconcile(a)
	if len(e.attachments()) != 0 || len(e.mountpointPods()) != 0 {
		t.Fatal("a Running workload without an attachment (a v1 mount) got one")
	}
}

func TestOtherDriverAndUnscheduledIgnored(t *testing.T) {
	objs := volumeObjs("pv", nil, func(pv *corev1.PersistentVolume, _ *corev1.PersistentVolumeClaim) {
		pv.Spec.CSI.Driver = "ebs.csi.aws.com"
	})
	a := workload("a", "pv")
	u := workload("u", "pv2", func(p *corev1.Pod) { p.Spec.NodeName = "" })
	e := newEnv(t, append(append(objs, volumeObjs("pv2", nil)...), a, u)...)
	e.mustReconcile(a, u)
	if len(e.attachments()) != 0 {
		t.Fatal("attachment for another driver's PV or an unscheduled Pod")
	}
}

func TestWritesArePreconditioned(t *testing.T) {
	a := workload("a", "pv")
	e := newEnv(t, append(volumeObjs("pv", nil), a)...)
	e.mustReconcile(a)
	stale := e.attachments()[0]
	fresh := stale.DeepCopy()
	fresh.Labels["touched"] = "yes" // someone else writes in between
	if err := e.c.Update(context.Background(), fresh); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	entry := s3api.WorkloadPodAttachment{WorkloadPodUID: "uid-b", AttachmentTime: metav1.NewTime(testNow)}
	for what, err := range map[string]error{
		"add":    e.r.addWorkload(ctx, stale.DeepCopy(), "mp-x", entry),
		"remove": e.r.removeWorkloads(ctx, stale.DeepCopy(), map[string]bool{"uid-a": true}),
		"delete": e.r.deleteAttachment(ctx, stale.DeepCopy()),
	} {
		if !apierrors.IsConflict(errors.Unwrap(err)) && !apierrors.IsConflict(err) {
			t.Errorf("%s with a stale attachment: %v, want a conflict", what, err)
		}
	}
	if got := e.attachments(); len(got) != 1 || got[0].MountpointPodFor("uid-a") == "" || got[0].MountpointPodFor("uid-b") != "" {
		t.Fatalf("a stale write went through: %+v", got)
	}
	// Unmounting cannot be undone: a stale attachment never gets a Mountpoint Pod asked to unmount.
	if mp := e.pod(testNS, stale.MountpointPodFor("uid-a")); mp.Annotations[s3api.AnnotationNeedsUnmount] != "" {
		t.Fatal("Mountpoint Pod asked to unmount on the word of a stale attachment")
	}
}

// A Mountpoint Pod named in the attachment for a workload but not created yet (a predecessor killed between
// the two writes) is that group's Pod: a second workload of the group waits for it to be created instead of
// getting a Pod of its own, and joins it once the first workload's reconcile has created it.
func TestNewWorkloadWaitsForAnIntendedMountpointPod(t *testing.T) {
	a, b := workload("a", "pv"), workload("b", "pv")
	e := newEnv(t, append(volumeObjs("pv", nil), a, b)...)
	e.mustReconcile(a)
	mp := e.attachments()[0].MountpointPodFor("uid-a")
	if err := e.c.Delete(context.Background(), e.pod(testNS, mp)); err != nil {
		t.Fatal(err)
	}
	if err := e.reconcile(b); err == nil {
		t.Fatal("the second workload was placed while its group's Mountpoint Pod does not exist")
	}
	if n := len(e.mountpointPods()); n != 0 {
		t.Fatalf("%d Mountpoint Pods made while the group's Pod is pending, want 0", n)
	}
	e.mustReconcile(a, b)
	if got := e.attachments()[0].MountpointPodFor("uid-b"); got != mp || len(e.mountpointPods()) != 1 {
		t.Fatalf("second workload on %q with %d Mountpoint Pods, want %s and 1", got, len(e.mountpointPods()), mp)
	}
}
