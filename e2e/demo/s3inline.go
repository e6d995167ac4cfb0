package demo

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/stowage-csi/stowage/e2e/ebsstack"
	"github.com/stowage-csi/stowage/e2e/s3stack"
)

// The inline volume scenario's objects.
const (
	s3InlineScenario = "11. S3: an inline volume with the Pod's own credentials"
	s3InlineBucket   = "demo-team-bucket"
	s3InlineRole     = "arn:aws:iam::111122223333:role/demo-team"
	s3InlineSA       = "demo-team"
	s3InlinePod      = "s3-inline-app"
)

// s3Inline is a CSI inline ephemeral volume, which upstream does not offer: the bucket is named in the Pod
// itself, and the mount uses only the Pod's ServiceAccount token, exchanged by STS (the rig's stand-in,
// which verifies the token against the API server's keys) for credentials of an account that owns just that
// bucket. The driver's own identity is never lent to a Pod.
func s3Inline(ctx context.Context, s *s3stack.Stack, report *ebsstack.Report) error {
	report.Scenario(s3InlineScenario)
	var pod *v1.Pod
	steps := []step{
		{"role and ServiceAccount", func(ctx context.Context) (string, error) {
			if err := s.AddRole(ctx, s3InlineRole, s3InlineBucket, "default/"+s3InlineSA); err != nil {
				return "", err
			}
			sa := &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: s3InlineSA, Namespace: "default",
				Annotations: map[string]string{"eks.amazonaws.com/role-arn": s3InlineRole}}}
			if _, err := s.Client.CoreV1().ServiceAccounts("default").Create(ctx, sa, metav1.CreateOptions{}); err != nil {
				return "", err
			}
			return fmt.Sprintf("Bucket %s owned by the account of role %s, which ServiceAccount default/%s may assume", s3InlineBucket, s3InlineRole, s3InlineSA), nil
		}},
		{"Pod with an inline volume", func(ctx context.Context) (string, error) {
			before := s.STS.Calls("ok")
			attrs := map[string]string{"bucketName": s3InlineBucket, "authenticationSource": "pod"}
			if _, err := s.CreateInlineWorkload(ctx, s3InlinePod, s3Node, s3InlineSA, attrs); err != nil {
				return "", err
			}
			var err error
			if pod, err = s.WaitRunning(ctx, s3InlinePod); err != nil {
				return "", err
			}
			if s.STS.Calls("ok") == before {
				return "", fmt.Errorf("the Pod's volume mounted without STS issuing credentials")
			}
			mp, _, err := s.ServingPod(ctx, string(pod.UID))
			if err != nil {
				return "", err
			}
			return fmt.Sprintf("Pod %s Running; its own Mountpoint Pod mount-s3/%s mounted %s with credentials STS gave for the Pod's token", s3InlinePod, mp, s3InlineBucket), nil
		}},
		{"write", func(ctx context.Context) (string, error) {
			data := []byte("written with the Pod's own credentials\n")
			dir := s.Nodes[s3Node].Kubelet.PublishPath(string(pod.UID), s3stack.VolumeName)
			if err := os.WriteFile(filepath.Join(dir, s3File), data, 0o644); err != nil {
				return "", err
			}
			if err := s.WaitObject(ctx, s3InlineBucket, s3File, data); err != nil {
				return "", err
			}
			return fmt.Sprintf("%s wrote %s; it is s3://%s/%s", s3InlinePod, s3File, s3InlineBucket, s3File), nil
		}},
		{"Pod deleted, volume gone", func(ctx context.Context) (string, error) {
			if err := s.DeleteWorkload(ctx, s3InlinePod); err != nil {
				return "", err
			}
			err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, s3stack.StepTimeout, true, func(ctx context.Context) (bool, error) {
				mps, err := s.MountpointPods(ctx)
				if err != nil {
					return false, nil
				}
				atts, err := s.Attachments(ctx)
				return err == nil && len(mps) == 0 && len(atts) == 0, nil
			})
			if err != nil {
				return "", fmt.Errorf("wait for the inline volume's Mountpoint Pod and attachment to go: %w", err)
			}
			return "Pod deleted: its Mountpoint Pod, attachment and mount are gone with it", nil
		}},
	}
	return runSteps(ctx, report, steps)
}
