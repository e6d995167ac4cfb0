//go:build e2e

package s3chart_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/stowage-csi/stowage/e2e/rig"
	"github.com/stowage-csi/stowage/e2e/s3install"
	"github.com/stowage-csi/stowage/shared/s3api"
)

// readOnlyApart runs a read-write and a read-only workload of one volume on one node: they get a Mountpoint
// Pod each (a read-only workload never shares a writable Mountpoint), the read-only one reads what the other
// wrote and cannot write itself, and both Mountpoint Pods go with the workloads.
func readOnlyApart(t *testing.T, ctx context.Context, client kubernetes.Interface, dyn dynamic.Interface) {
	const nodeName = "node-a"
	rw := createWorkload(t, ctx, client, "rw", nodeName, volume,
		"echo from-rw > /data/rw.txt && echo written && exec sleep 3600", false)
	waitLog(t, ctx, client, rw.Name, "written")
	ro := createWorkload(t, ctx, client, "ro", nodeName, volume,
		"cat /data/rw.txt; if echo no 2>/dev/null > /data/ro.txt; then echo wrote; else echo write-refused; fi; exec sleep 3600", true)
	waitLog(t, ctx, client, ro.Name, "from-rw\nwrite-refused")

	serving := map[string]string{} // workload UID -> Mountpoint Pod
	atts, err := s3install.ListAttachments(ctx, dyn)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range atts {
		for mp, workloads := range a.Spec.MountpointS3PodAttachments {
			for _, w := range workloads {
				serving[w.WorkloadPodUID] = mp
			}
		}
	}
	rwMP, roMP := serving[string(rw.UID)], serving[string(ro.UID)]
	if rwMP == "" || roMP == "" || rwMP == roMP {
		t.Errorf("read-write Pod served by Mountpoint Pod %q, read-only Pod by %q: want two different ones", rwMP, roMP)
	}
	for _, mp := range []string{rwMP, roMP} {
		if mp == "" {
			continue
		}
		p, err := client.CoreV1().Pods(s3api.DefaultMountpointNamespace).Get(ctx, mp, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if p.Spec.NodeName != nodeName || p.Status.Phase != corev1.PodRunning {
			t.Errorf("Mountpoint Pod %s: node %s phase %s, want Running on %s", mp, p.Spec.NodeName, p.Status.Phase, nodeName)
		}
	}

	deletePods(t, ctx, client, rw.Name, ro.Name)
	rig.Eventually(t, ctx, 4*time.Minute, "the Mountpoint Pods and attachments to go", func(ctx context.Context) (bool, error) {
		pods, err := client.CoreV1().Pods(s3api.DefaultMountpointNamespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		atts, err := s3install.ListAttachments(ctx, dyn)
		return err == nil && len(pods.Items) == 0 && len(atts) == 0, err
	})
}
