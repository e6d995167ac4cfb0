package reconciler

import (
	"context"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stowage-csi/stowage/shared/s3api"
)

const inlineRole = "arn:aws:iam::111122223333:role/reader"

// inlineWorkload is a scheduled Pod of ServiceAccount reader with one inline volume "data" of driver.
func inlineWorkload(name, driver string, attrs map[string]string) *corev1.Pod {
	p := workload(name, "", withSA("reader"))
	p.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{
		Driver: driver, VolumeAttributes: attrs}}}}
	return p
}

func readerSA() *corev1.ServiceAccount {
	return &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "reader",
		Annotations: map[string]string{roleARNAnnotation: inlineRole}}}
}

// TestInlineVolumeGetsItsOwnMountpointPod: each Pod's inline volume gets an attachment keyed by the Pod's
// own volume name and the kubelet's volume ID, with the ServiceAccount's role, and its own Mountpoint Pod,
// even for the same bucket and ServiceAccount; when the Pod goes, so do its attachment and Mountpoint Pod.
func TestInlineVolumeGetsItsOwnMountpointPod(t *testing.T) {
	attrs := map[string]string{"bucketName": "b", "authenticationSource": "pod"}
	a, b := inlineWorkload("a", s3api.DriverName, attrs), inlineWorkload("b", s3api.DriverName, attrs)
	e := newEnv(t, a, b, readerSA())
	e.mustReconcile(a, b)
	as := e.attachments()
	if len(as) != 2 {
		t.Fatalf("%d attachments, want one per Pod", len(as))
	}
	mps := map[string]string{}
	for _, at := range as {
		uid := "uid-a"
		if at.MountpointPodFor(uid) == "" {
			uid = "uid-b"
		}
		want := s3api.MountpointS3PodAttachmentSpec{NodeName: testNode, PersistentVolumeName: s3api.InlineVolumeName(uid, "data"),
			VolumeID: s3api.InlineVolumeHandle(uid, "data"), AuthenticationSource: "pod", WorkloadNamespace: "default",
			WorkloadServiceAccountName: "reader", WorkloadServiceAccountIAMRoleARN: inlineRole}
		got := at.Spec
		got.MountpointS3PodAttachments = nil
		if !reflect.DeepEqual(got, want) {
			t.Errorf("attachment of %s:\n%+v\nwant %+v", uid, got, want)
		}
		mps[uid] = at.MountpointPodFor(uid)
	}
	if mps["uid-a"] == "" || mps["uid-a"] == mps["uid-b"] {
		t.Fatalf("Mountpoint Pods %v: want one per Pod", mps)
	}
	if got := e.pod(testNS, mps["uid-a"]).Annotations[s3api.AnnotationVolumeName]; got != "uid-a-data" {
		t.Errorf("Mountpoint Pod volume-name annotation %q", got)
	}

	if err := e.c.Delete(context.Background(), e.pod("default", "a")); err != nil {
		t.Fatal(err)
	}
	e.mustReconcile(a)
	if as := e.attachments(); len(as) != 1 || as[0].MountpointPodFor("uid-b") == "" {
		t.Fatalf("after a was deleted: %+v, want b's attachment only", as)
	}
	if e.pod(testNS, mps["uid-a"]).Annotations[s3api.AnnotationNeedsUnmount] != "true" {
		t.Error("a's Mountpoint Pod not asked to unmount")
	}
	if e.pod(testNS, mps["uid-b"]).Annotations[s3api.AnnotationNeedsUnmount] != "" {
		t.Error("b's Mountpoint Pod asked to unmount")
	}
}

// TestInlineVolumeRefusedOrIgnored: an inline volume of this driver without authenticationSource pod gets
// no attachment and a Warning Event naming the attribute (and no error: retries cannot fix a Pod's spec);
// another driver's inline volume is none of the controller's business.
func TestInlineVolumeRefusedOrIgnored(t *testing.T) {
	for _, tc := range []struct {
		name, driver string
		attrs        map[string]string
		wantEvent    bool
	}{
		{name: "driver credentials by default", driver: s3api.DriverName, attrs: map[string]string{"bucketName": "b"}, wantEvent: true},
		{name: "driver credentials", driver: s3api.DriverName, attrs: map[string]string{"bucketName": "b", "authenticationSource": "driver"}, wantEvent: true},
		{name: "another driver", driver: "other.csi.example.com", attrs: map[string]string{"authenticationSource": "pod"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := inlineWorkload("a", tc.driver, tc.attrs)
			e := newEnv(t, w, readerSA())
			e.mustReconcile(w)
			if as, mps := e.attachments(), e.mountpointPods(); len(as) != 0 || len(mps) != 0 {
				t.Fatalf("%d attachments, %d Mountpoint Pods: want none", len(as), len(mps))
			}
			select {
			case ev := <-e.events.Events:
				if !tc.wantEvent || !strings.Contains(ev, "MountpointPodAttachmentFailed") || !strings.Contains(ev, `volume attribute authenticationSource=`) {
					t.Fatalf("event %q (want one: %v)", ev, tc.wantEvent)
				}
			default:
				if tc.wantEvent {
					t.Fatal("no Event for the refused inline volume")
				}
			}
		})
	}
}

// TestInlineReadOnlyVolume: a readOnly inline volume gets a read-only Mountpoint Pod.
func TestInlineReadOnlyVolume(t *testing.T) {
	w := inlineWorkload("a", s3api.DriverName, map[string]string{"bucketName": "b", "authenticationSource": "pod"})
	ro := true
	w.Spec.Volumes[0].CSI.ReadOnly = &ro
	e := newEnv(t, w, readerSA())
	e.mustReconcile(w)
	mp := e.attachments()[0].MountpointPodFor("uid-a")
	if got := e.pod(testNS, mp).Annotations[AnnotationAccess]; got != string(ReadOnly) {
		t.Errorf("access annotation %q, want read-only", got)
	}
}
