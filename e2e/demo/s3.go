package demo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/stowage-csi/stowage/e2e/ebsstack"
	"github.com/stowage-csi/stowage/e2e/kubeletsim"
	"github.com/stowage-csi/stowage/e2e/s3stack"
)

// The S3 scenario's objects.
const (
	s3Scenario = "9. S3: two Pods share one Mountpoint Pod"
	s3Bucket   = "demo-bucket"
	s3Volume   = "s3-data"
	s3Node     = "node-a"
	s3File     = "hello.txt"
)

var s3Apps = [2]string{"s3-app-1", "s3-app-2"}

// startS3 brings up one of the S3 driver's own stacks (package s3stack) after the EBS scenarios: a second
// control plane, versitygw, s3-controller with its CSI controller service and csi-provisioner (dynamic
// provisioning), and s3-node with a kubelet simulator on one node; with sts, versitygw keeps accounts and the
// STS stand-in serves pod-level credentials (inline volumes). The returned stop tears it down.
func startS3(ctx context.Context, opts Options, out io.Writer, start time.Time, name string, sts bool) (*s3stack.Stack, func() error, error) {
	if _, err := os.Stat("/dev/fuse"); err != nil {
		return nil, nil, errors.New("the S3 scenarios need FUSE (/dev/fuse); load the fuse module")
	}
	dir := ""
	if opts.Dir != "" {
		dir = filepath.Join(opts.Dir, name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, nil, err
		}
	}
	fmt.Fprintln(out)
	s, err := s3stack.Start(ctx, s3stack.Options{Dir: dir, Nodes: []string{s3Node}, Provisioner: !sts, STS: sts, Progress: func(f string, a ...any) {
		fmt.Fprintf(out, "==> "+f+" [%s]\n", append(a, ebsstack.FormatDuration(time.Since(start)))...)
	}})
	if err != nil {
		return nil, nil, fmt.Errorf("start the S3 stack: %w", err)
	}
	stop := func() error {
		fmt.Fprintln(out, "==> Tearing down the S3 stack: kubelet, s3-node, s3-controller, versitygw, control plane")
		return s.Stop()
	}
	return s, stop, nil
}

// s3Sharing is the S3 scenario: a bucket in versitygw behind a static PV, two Pods on one node that share
// one Mountpoint Pod, a file written through one and read through the other, and both deleted with the
// Mountpoint Pod gone.
func s3Sharing(ctx context.Context, s *s3stack.Stack, report *ebsstack.Report) error {
	report.Scenario(s3Scenario)
	var pods [2]*v1.Pod
	var mountpointPod string
	steps := []step{
		{"bucket and static PV", func(ctx context.Context) (string, error) {
			if err := s.CreateVolume(ctx, s3stack.Volume{Name: s3Volume, Bucket: s3Bucket, MountOptions: []string{"allow-delete"}}); err != nil {
				return "", err
			}
			return fmt.Sprintf("Bucket %s in versitygw, static PV %s (driver s3.csi.aws.com), PVC %s Bound", s3Bucket, s3Volume, s3Volume), nil
		}},
		{"two Pods on one node", func(ctx context.Context) (string, error) {
			for i, name := range s3Apps {
				if _, err := s.CreateWorkload(ctx, s3stack.Workload{Name: name, Node: s3Node, Claim: s3Volume}); err != nil {
					return "", err
				}
				p, err := s.WaitRunning(ctx, name)
				if err != nil {
					return "", err
				}
				pods[i] = p
			}
			return fmt.Sprintf("Pods %s and %s Running on %s, PVC %s mounted through FUSE", s3Apps[0], s3Apps[1], s3Node, s3Volume), nil
		}},
		{"one Mountpoint Pod", func(ctx context.Context) (string, error) {
			var atts [2]string
			var mps [2]string
			for i, p := range pods {
				mp, att, err := s.ServingPod(ctx, string(p.UID))
				if err != nil || mp == "" {
					return "", fmt.Errorf("no attachment for Pod %s (%v)", p.Name, err)
				}
				mps[i], atts[i] = mp, att
			}
			if mps[0] != mps[1] {
				return "", fmt.Errorf("the Pods %s and %s are served by Mountpoint Pods %s and %s, want one", s3Apps[0], s3Apps[1], mps[0], mps[1])
			}
			all, err := s.MountpointPods(ctx)
			if err != nil {
				return "", err
			}
			mountpointPod = mps[0]
			return fmt.Sprintf("Both served by Mountpoint Pod mount-s3/%s (MountpointS3PodAttachment %s; %d Mountpoint Pod in all)", mountpointPod, atts[0], len(all)), nil
		}},
		{"write and read", func(ctx context.Context) (string, error) {
			data := []byte("written through " + s3Apps[0] + ", read through " + s3Apps[1] + "\n")
			if err := os.WriteFile(filepath.Join(s.PublishPath(pods[0]), s3File), data, 0o644); err != nil {
				return "", err
			}
			if err := s.WaitObject(ctx, s3Bucket, s3File, data); err != nil {
				return "", err
			}
			var got []byte
			err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, s3stack.StepTimeout, true, func(context.Context) (bool, error) {
				var err error
				got, err = os.ReadFile(filepath.Join(s.PublishPath(pods[1]), s3File))
				return err == nil && bytes.Equal(got, data), nil
			})
			if err != nil {
				return "", fmt.Errorf("%s read %q through %s, want %q: %w", s3File, got, s3Apps[1], data, err)
			}
			return fmt.Sprintf("%s wrote %s (%d bytes), %s read the same bytes; object s3://%s/%s", s3Apps[0], s3File, len(data), s3Apps[1], s3Bucket, s3File), nil
		}},
		{"delete", func(ctx context.Context) (string, error) {
			for _, name := range s3Apps {
				if err := s.DeleteWorkload(ctx, name); err != nil {
					return "", err
				}
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
				return "", fmt.Errorf("wait for Mountpoint Pod %s and its attachment to go: %w", mountpointPod, err)
			}
			if left, err := kubeletsim.MountsUnder(s.Dir); err != nil || len(left) > 0 {
				return "", fmt.Errorf("mounts left: %v %v", left, err)
			}
			return fmt.Sprintf("Pods deleted: Mountpoint Pod %s unmounted, ended and deleted; no attachment or mount left", mountpointPod), nil
		}},
	}
	return runSteps(ctx, report, steps)
}
