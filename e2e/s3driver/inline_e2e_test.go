//go:build e2e

package s3driver

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stowage-csi/stowage/e2e/kubeletsim"
	"github.com/stowage-csi/stowage/e2e/rig"
	"github.com/stowage-csi/stowage/e2e/s3stack"
	"github.com/stowage-csi/stowage/shared/s3api"
)

const (
	inlineRole  = "arn:aws:iam::111122223333:role/inline-reader"
	otherRole   = "arn:aws:iam::111122223333:role/other-bucket"
	inlineBkt   = "inline-bucket"
	otherBucket = "other-bucket"
)

// TestE2ES3DriverInlineVolumes runs CSI inline volumes against versitygw with per-account buckets and the
// STS stand-in, which verifies the Pods' projected tokens against the API server's issuer keys:
//   - a Pod whose ServiceAccount the role trusts mounts the bucket with its own token (the stand-in answered,
//     the attachment carries the role), reads and writes it; when the Pod goes, its Mountpoint Pod (exit 0),
//     attachment, mounts and credential files go too;
//   - a Pod whose ServiceAccount claims the role but is not trusted, a Pod whose role's account does not own
//     the bucket, and an inline volume with driver-level credentials each get a FailedMount that says why,
//     and leave nothing behind.
func TestE2ES3DriverInlineVolumes(t *testing.T) {
	ctx, s := startStack(t, s3stack.Options{Nodes: []string{"node-a"}, STS: true})
	if err := s.AddRole(ctx, inlineRole, inlineBkt, "default/reader"); err != nil {
		t.Fatal(err)
	}
	if err := s.AddRole(ctx, otherRole, otherBucket, "default/other"); err != nil {
		t.Fatal(err)
	}
	// reader and outsider both claim inlineRole (the annotation is anyone's to write); only reader is trusted.
	for sa, role := range map[string]string{"reader": inlineRole, "outsider": inlineRole, "other": otherRole} {
		if _, err := s.Client.CoreV1().ServiceAccounts("default").Create(ctx, &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{
			Name: sa, Annotations: map[string]string{"eks.amazonaws.com/role-arn": role}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// The root account seeds the bucket: the workload then reads what it did not write.
	if _, err := s.S3.Client.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(inlineBkt), Key: aws.String("seed.txt"),
		Body: strings.NewReader("seeded\n")}); err != nil {
		t.Fatal(err)
	}
	node := s.NodeOrder[0]

	t.Run("trusted ServiceAccount", func(t *testing.T) {
		mps := watchMountpointPods(t, s)
		okBefore := s.STS.Calls("ok")
		const name = "inline-app"
		cleanupWorkloads(t, s, name)
		if _, err := s.CreateInlineWorkload(ctx, name, node, "reader", map[string]string{"bucketName": inlineBkt, "authenticationSource": "pod"}); err != nil {
			t.Fatal(err)
		}
		pod, err := s.WaitRunning(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if s.STS.Calls("ok") == okBefore {
			t.Error("the STS stand-in issued no credentials for the mount")
		}
		var att *s3api.MountpointS3PodAttachment
		atts := attachments(t, ctx, s)
		for i := range atts {
			if atts[i].MountpointPodFor(string(pod.UID)) != "" {
				att = &atts[i]
			}
		}
		if att == nil || att.Spec.PersistentVolumeName != s3api.InlineVolumeName(string(pod.UID), s3stack.VolumeName) ||
			att.Spec.VolumeID != s3api.InlineVolumeHandle(string(pod.UID), s3stack.VolumeName) ||
			att.Spec.WorkloadServiceAccountIAMRoleARN != inlineRole || att.Spec.AuthenticationSource != s3api.AuthenticationSourcePod {
			t.Fatalf("attachment of the inline volume: %+v", att)
		}
		held := holdComm(t, s, mountpointPod(t, ctx, s, att.MountpointPodFor(string(pod.UID))))

		dir := s.Nodes[node].Kubelet.PublishPath(string(pod.UID), s3stack.VolumeName)
		if got, err := os.ReadFile(filepath.Join(dir, "seed.txt")); err != nil || string(got) != "seeded\n" {
			t.Fatalf("read seed.txt through the inline volume: %q, %v", got, err)
		}
		if err := os.WriteFile(filepath.Join(dir, "from-pod.txt"), []byte("written by the Pod\n"), 0o644); err != nil {
			t.Fatalf("write through the inline volume: %v", err)
		}
		rig.Eventually(t, ctx, 30*time.Second, "from-pod.txt in the bucket", func(ctx context.Context) (bool, error) {
			out, err := s.S3.Client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(inlineBkt), Key: aws.String("from-pod.txt")})
			if err != nil {
				return false, nil
			}
			defer out.Body.Close()
			b, err := io.ReadAll(out.Body)
			return bytes.Equal(b, []byte("written by the Pod\n")), err
		})

		deleteWorkloads(t, ctx, s, name)
		checkNothingLeft(t, ctx, s)
		if left := held.credentials(t); len(left) > 0 {
			t.Errorf("credential files left in the comm dir of %s: %v", held.pod, left)
		}
		mps.checkEndedWithExit0(t)
	})

	for _, tc := range []struct {
		name, pod, sa string
		attrs         map[string]string
		want          []string // in the FailedMount Event
	}{{
		name: "ServiceAccount the role does not trust", pod: "inline-untrusted", sa: "outsider",
		attrs: map[string]string{"bucketName": inlineBkt, "authenticationSource": "pod"},
		want:  []string{"AssumeRoleWithWebIdentity", "AccessDenied", "subject system:serviceaccount:default:outsider"},
	}, {
		name: "role whose account does not own the bucket", pod: "inline-other-bucket", sa: "other",
		attrs: map[string]string{"bucketName": inlineBkt, "authenticationSource": "pod"},
		want:  []string{"bucket " + inlineBkt + " is not accessible", "ListObjectsV2", "StatusCode: 403"},
	}, {
		name: "driver-level credentials", pod: "inline-driver-creds", sa: "reader",
		attrs: map[string]string{"bucketName": inlineBkt},
		want:  []string{"InvalidArgument", "volume attribute authenticationSource", "inline"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			name := tc.pod
			cleanupWorkloads(t, s, name)
			pod, err := s.CreateInlineWorkload(ctx, name, node, tc.sa, tc.attrs)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("FailedMount: %s", waitFailedMount(t, ctx, s, name, tc.want...))
			if left, err := kubeletsim.MountsUnder(filepath.Dir(s.Nodes[node].Kubelet.PublishPath(string(pod.UID), s3stack.VolumeName))); err != nil || len(left) > 0 {
				t.Errorf("mounted for the failing workload: %v %v", left, err)
			}
			deleteWorkloads(t, ctx, s, name)
			checkNothingLeft(t, ctx, s)
		})
	}
}
