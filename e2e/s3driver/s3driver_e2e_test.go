//go:build e2e

package s3driver

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stowage-csi/stowage/e2e/rig"
	"github.com/stowage-csi/stowage/e2e/s3stack"
	"github.com/stowage-csi/stowage/shared/s3api"
)

// startStack starts the S3 stack for one test with opts (its progress goes to the test log); t.Cleanup
// stops it and fails the test if anything is left mounted.
func startStack(t *testing.T, opts s3stack.Options) (context.Context, *s3stack.Stack) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	t.Cleanup(cancel)
	opts.Progress = func(f string, a ...any) { t.Logf(f, a...) }
	s, err := s3stack.Start(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(s.LogTails(60))
		}
		if err := s.Stop(); err != nil {
			t.Error(err)
		}
	})
	return ctx, s
}

// attachments lists the MountpointS3PodAttachments.
func attachments(t *testing.T, ctx context.Context, s *s3stack.Stack) []s3api.MountpointS3PodAttachment {
	t.Helper()
	atts, err := s.Attachments(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return atts
}

// servingPod returns the name of the Mountpoint Pod that serves workload pod, waiting for the attachment.
func servingPod(t *testing.T, ctx context.Context, s *s3stack.Stack, pod *v1.Pod) string {
	t.Helper()
	var mp string
	rig.Eventually(t, ctx, s3stack.StepTimeout, "an attachment for Pod "+pod.Name, func(ctx context.Context) (bool, error) {
		for _, a := range attachments(t, ctx, s) {
			if mp = a.MountpointPodFor(string(pod.UID)); mp != "" {
				return true, nil
			}
		}
		return false, nil
	})
	return mp
}

func run(t *testing.T, ctx context.Context, s *s3stack.Stack, w s3stack.Workload) *v1.Pod {
	t.Helper()
	if _, err := s.CreateWorkload(ctx, w); err != nil {
		t.Fatal(err)
	}
	pod, err := s.WaitRunning(ctx, w.Name)
	if err != nil {
		t.Fatalf("%v\n%s", err, events(ctx, s, w.Name))
	}
	return pod
}

// events is the Pod's Events, one per line, for failure messages.
func events(ctx context.Context, s *s3stack.Stack, pod string) string {
	l, err := s.Client.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + pod})
	if err != nil {
		return err.Error()
	}
	var b bytes.Buffer
	for _, e := range l.Items {
		b.WriteString(e.Reason + ": " + e.Message + "\n")
	}
	return b.String()
}

// TestE2ES3DriverSharing runs workloads on one node against one bucket through the whole driver: the same
// volume with the same settings shares one Mountpoint Pod, a read-only workload and another fsGroup each get
// their own; what one workload writes another reads; and deleting the workloads ends every Mountpoint Pod
// (exit 0, Succeeded, then deleted, as a watch from the start saw them), s3-node removes the credential
// files from each Pod's comm dir before the Pod ends, and no attachment or mount is left.
func TestE2ES3DriverSharing(t *testing.T) {
	ctx, s := startStack(t, s3stack.Options{})
	mps := watchMountpointPods(t, s)
	if err := s.CreateVolume(ctx, s3stack.Volume{Name: "shared", Bucket: "bucket-shared", MountOptions: []string{"allow-delete", "allow-other"}}); err != nil {
		t.Fatal(err)
	}
	node := s.NodeOrder[0]
	a := run(t, ctx, s, s3stack.Workload{Name: "writer", Node: node, Claim: "shared"})
	b := run(t, ctx, s, s3stack.Workload{Name: "reader", Node: node, Claim: "shared"})
	ro := run(t, ctx, s, s3stack.Workload{Name: "read-only", Node: node, Claim: "shared", ReadOnly: true})
	grp := run(t, ctx, s, s3stack.Workload{Name: "group", Node: node, Claim: "shared", FSGroup: s3stack.Int64(4000)})

	mpA, mpB, mpRO, mpGrp := servingPod(t, ctx, s, a), servingPod(t, ctx, s, b), servingPod(t, ctx, s, ro), servingPod(t, ctx, s, grp)
	if mpA != mpB {
		t.Errorf("two workloads with the same volume and settings use Mountpoint Pods %s and %s, want one", mpA, mpB)
	}
	if mpRO == mpA {
		t.Errorf("the read-only workload shares Mountpoint Pod %s with read-write ones", mpRO)
	}
	if mpGrp == mpA || mpGrp == mpRO {
		t.Errorf("the workload with fsGroup 4000 shares Mountpoint Pod %s", mpGrp)
	}

	data := []byte("written by one workload, read by another\n")
	if err := os.WriteFile(filepath.Join(s.PublishPath(a), "note.txt"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := s.WaitObject(ctx, "bucket-shared", "note.txt", data); err != nil {
		t.Fatal(err)
	}
	rig.Eventually(t, ctx, 30*time.Second, "the note through the read-only workload's mount", func(context.Context) (bool, error) {
		got, err := os.ReadFile(filepath.Join(s.PublishPath(ro), "note.txt"))
		return bytes.Equal(got, data), err
	})
	if got, err := os.ReadFile(filepath.Join(s.PublishPath(b), "note.txt")); !bytes.Equal(got, data) {
		t.Fatalf("the note through the second workload's mount: %q, %v", got, err)
	}
	if err := os.WriteFile(filepath.Join(s.PublishPath(ro), "refused.txt"), data, 0o644); err == nil {
		t.Error("a write through the read-only workload's mount succeeded")
	}

	var held []*heldComm
	for _, mp := range []string{mpA, mpRO, mpGrp} {
		held = append(held, holdComm(t, s, mountpointPod(t, ctx, s, mp)))
	}
	deleteWorkloads(t, ctx, s, a.Name, b.Name, ro.Name, grp.Name)
	checkNothingLeft(t, ctx, s)
	mps.checkEndedWithExit0(t)
	for _, h := range held {
		if left := h.credentials(t); len(left) > 0 {
			t.Errorf("Mountpoint Pod %s ended with credential files %v in its comm dir: s3-node did not remove them", h.pod, left)
		}
	}
}
