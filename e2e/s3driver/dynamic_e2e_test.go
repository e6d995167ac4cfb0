//go:build e2e

package s3driver

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stowage-csi/stowage/e2e/rig"
	"github.com/stowage-csi/stowage/e2e/s3stack"
)

const dynamicBucket = "dynamic"

// TestE2ES3DynamicProvisioning runs s3-controller's CSI controller service with Stowage's csi-provisioner
// on the real rig: a claim of a class naming a bucket gets a PV whose volume is its own prefix
// "<prefix>/<pv>/"; two Pods on one node share its data, which lands under that prefix; a second claim gets
// another prefix and does not see the first one's files; deleting the claims keeps the objects when the
// class says nothing and removes exactly the volume's prefix when it sets deleteObjectsOnDelete; a class
// naming a missing bucket leaves its claim Pending with an Event naming the bucket.
func TestE2ES3DynamicProvisioning(t *testing.T) {
	ctx, s := startStack(t, s3stack.Options{Provisioner: true})
	if err := s.S3.CreateBucket(ctx, dynamicBucket); err != nil {
		t.Fatal(err)
	}
	must(t, s.CreateClass(ctx, "s3-keep", map[string]string{"bucketName": dynamicBucket, "prefix": "team/${pvc.namespace}"}, "allow-delete", "allow-other"))
	must(t, s.CreateClass(ctx, "s3-delete", map[string]string{"bucketName": dynamicBucket, "prefix": "team/${pvc.namespace}", "deleteObjectsOnDelete": "true"}, "allow-delete", "allow-other"))
	must(t, s.CreateClass(ctx, "s3-missing", map[string]string{"bucketName": "no-such-bucket"}, "allow-delete", "allow-other"))
	// The missing bucket's claim goes first: its Event is checked at the end, after the provisioner has had
	// all the other steps' time to try.
	must(t, s.CreateClaim(ctx, "missing", "s3-missing"))
	must(t, s.CreateClaim(ctx, "one", "s3-delete"))
	must(t, s.CreateClaim(ctx, "two", "s3-keep"))
	pvOne, pvTwo := boundPV(t, ctx, s, "one"), boundPV(t, ctx, s, "two")
	prefixOne, prefixTwo := "team/default/"+pvOne.Name+"/", "team/default/"+pvTwo.Name+"/"
	for pv, prefix := range map[*v1.PersistentVolume]string{pvOne: prefixOne, pvTwo: prefixTwo} {
		if got := pv.Spec.CSI.VolumeAttributes["prefix"]; got != prefix || pv.Spec.CSI.VolumeAttributes["bucketName"] != dynamicBucket {
			t.Errorf("PV %s attributes %v, want bucket %s prefix %s", pv.Name, pv.Spec.CSI.VolumeAttributes, dynamicBucket, prefix)
		}
	}
	t.Logf("PVs %s (%s) and %s (%s)", pvOne.Name, pvOne.Spec.CSI.VolumeHandle, pvTwo.Name, pvTwo.Spec.CSI.VolumeHandle)

	// Objects that must outlive both volumes: beside the prefixes, and one whose key starts like volume
	// one's prefix without its '/'.
	outside := []string{"team/default/outside.txt", "team/default/" + pvOne.Name + "x/lookalike.txt", "root.txt"}
	for _, k := range outside {
		if err := s.S3.PutObject(ctx, dynamicBucket, k, []byte("outside")); err != nil {
			t.Fatal(err)
		}
	}

	node := s.NodeOrder[0]
	a := run(t, ctx, s, s3stack.Workload{Name: "dyn-a", Node: node, Claim: "one"})
	b := run(t, ctx, s, s3stack.Workload{Name: "dyn-b", Node: node, Claim: "one"})
	c := run(t, ctx, s, s3stack.Workload{Name: "dyn-c", Node: node, Claim: "two"})
	data := []byte("written into a dynamically provisioned volume\n")
	if err := os.WriteFile(filepath.Join(dynPublishPath(s, a, pvOne), "file"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	must(t, s.WaitObject(ctx, dynamicBucket, prefixOne+"file", data))
	rig.Eventually(t, ctx, 30*time.Second, "the file through the second Pod's mount", func(context.Context) (bool, error) {
		got, err := os.ReadFile(filepath.Join(dynPublishPath(s, b, pvOne), "file"))
		return bytes.Equal(got, data), err
	})
	if err := os.WriteFile(filepath.Join(dynPublishPath(s, c, pvTwo), "other"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dynPublishPath(s, c, pvTwo))
	if err != nil || len(entries) != 1 || entries[0].Name() != "other" {
		t.Fatalf("volume two shows %v (%v), want only its own file", entries, err)
	}
	for _, p := range []*v1.Pod{a, b, c} {
		if err := s.DeleteWorkload(ctx, p.Name); err != nil {
			t.Fatal(err)
		}
	}

	// The keep class: the PV goes, the objects stay.
	must(t, s.DeleteClaim(ctx, "two", pvTwo.Name))
	if keys := dynListKeys(t, ctx, s, prefixTwo); !slices.Equal(keys, []string{prefixTwo + "other"}) {
		t.Errorf("after deleting claim two (objects kept): %v under %s", keys, prefixTwo)
	}
	// The delete class: exactly volume one's prefix goes.
	must(t, s.DeleteClaim(ctx, "one", pvOne.Name))
	want := append([]string{prefixTwo + "other"}, outside...)
	slices.Sort(want)
	if keys := dynListKeys(t, ctx, s, ""); !slices.Equal(keys, want) {
		t.Errorf("bucket after deleting claim one (objects deleted): %v, want %v", keys, want)
	}

	rig.Eventually(t, ctx, s3stack.StepTimeout, "a ProvisioningFailed Event naming the missing bucket", func(ctx context.Context) (bool, error) {
		msgs := events(ctx, s, "missing")
		return strings.Contains(msgs, "ProvisioningFailed") && strings.Contains(msgs, `bucketName="no-such-bucket"`), nil
	})
	if pvc, err := s.Client.CoreV1().PersistentVolumeClaims("default").Get(ctx, "missing", metav1.GetOptions{}); err != nil || pvc.Status.Phase != v1.ClaimPending {
		t.Errorf("claim of the missing bucket: %v, %v; want Pending", pvc.Status.Phase, err)
	}
	t.Logf("Events of claim missing:\n%s", events(ctx, s, "missing"))

	// deploy/rbac/csi-provisioner.yaml, as it is for EBS, was enough: the API server refused nothing.
	if log, err := os.ReadFile(s.Process(s3stack.ProvisionerName).LogPath); err != nil || strings.Contains(string(log), "forbidden") {
		t.Errorf("csi-provisioner was refused something under its RBAC (%v):\n%s", err, log)
	}
}

// dynPublishPath is the Pod's mount of a dynamic volume: the kubelet names the directory after the PV.
func dynPublishPath(s *s3stack.Stack, pod *v1.Pod, pv *v1.PersistentVolume) string {
	return s.Nodes[pod.Spec.NodeName].Kubelet.PublishPath(string(pod.UID), pv.Name)
}

// dynListKeys lists the bucket's keys under prefix, sorted.
func dynListKeys(t *testing.T, ctx context.Context, s *s3stack.Stack, prefix string) []string {
	t.Helper()
	keys, err := s.ListKeys(ctx, dynamicBucket, prefix)
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

// must fails the test on err.
func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// boundPV waits for the claim's PV.
func boundPV(t *testing.T, ctx context.Context, s *s3stack.Stack, claim string) *v1.PersistentVolume {
	t.Helper()
	pv, err := s.BoundPV(ctx, claim)
	must(t, err)
	return pv
}
