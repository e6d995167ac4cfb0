//go:build e2e

package s3driver

import (
	"path/filepath"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stowage-csi/stowage/e2e/kubeletsim"
	"github.com/stowage-csi/stowage/e2e/s3stack"
)

// TestE2ES3DriverMountErrors checks what a user sees when a volume cannot be mounted: the workload stays
// Pending with a FailedMount Event that says why (Mountpoint's own error from mount.err for a missing bucket,
// the option's name for a refused mount option), nothing is mounted for it, and deleting it ends its
// Mountpoint Pod (exit 0) and leaves no attachment or mount.
func TestE2ES3DriverMountErrors(t *testing.T) {
	ctx, s := startStack(t, s3stack.Options{Nodes: []string{"node-a"}})
	node := s.NodeOrder[0]

	for _, tc := range []struct {
		name   string
		vol    s3stack.Volume
		remove bool     // delete the bucket after CreateVolume made it
		want   []string // in the FailedMount Event
	}{{
		name: "missing bucket", remove: true,
		vol:  s3stack.Volume{Name: "missing", Bucket: "bucket-missing"},
		want: []string{"Mountpoint in Pod", "bucket bucket-missing is not accessible", "NoSuchBucket"},
	}, {
		name: "refused mount option",
		vol:  s3stack.Volume{Name: "bad-option", Bucket: "bucket-bad-option", MountOptions: []string{"ca-bundle /etc/x"}},
		want: []string{"InvalidArgument", "--ca-bundle"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			mps := watchMountpointPods(t, s)
			if err := s.CreateVolume(ctx, tc.vol); err != nil {
				t.Fatal(err)
			}
			if tc.remove {
				if _, err := s.S3.NewClient().DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: aws.String(tc.vol.Bucket)}); err != nil {
					t.Fatal(err)
				}
			}
			name := "app-" + tc.vol.Name
			cleanupWorkloads(t, s, name)
			if _, err := s.CreateWorkload(ctx, s3stack.Workload{Name: name, Node: node, Claim: tc.vol.Name}); err != nil {
				t.Fatal(err)
			}
			msg := waitFailedMount(t, ctx, s, name, tc.want...)
			t.Logf("FailedMount: %s", msg)

			pod, err := s.Client.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if pod.Status.Phase != v1.PodPending {
				t.Errorf("Pod %s is %s after a FailedMount, want Pending", name, pod.Status.Phase)
			}
			// The bind to the workload's target is the last step of a publish, made only once Mountpoint
			// serves: it must never be there.
			podDir := filepath.Dir(filepath.Dir(filepath.Dir(filepath.Dir(s.PublishPath(pod)))))
			if left, err := kubeletsim.MountsUnder(podDir); err != nil || len(left) > 0 {
				t.Errorf("mounted for the failing workload: %v %v", left, err)
			}

			deleteWorkloads(t, ctx, s, name)
			checkNothingLeft(t, ctx, s)
			mps.checkEndedWithExit0(t)
		})
	}
}
