package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stowage-csi/stowage/e2e/ebsstack"
	"github.com/stowage-csi/stowage/e2e/node"
	"github.com/stowage-csi/stowage/e2e/s3install"
	"github.com/stowage-csi/stowage/e2e/s3stack"
	"github.com/stowage-csi/stowage/shared/s3api"
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

// startS3STS brings up the S3 driver's process stack (package s3stack) for the inline volume scenario: a
// control plane, versitygw keeping accounts, the STS stand-in serving pod-level credentials, s3-controller and
// s3-node with a kubelet simulator on one node. It stays there because the real kubelet's projected tokens
// (CSIDriver tokenRequests) for pod-level credentials are not wired on real nodes yet. The returned stop
// tears it down.
func startS3STS(ctx context.Context, opts Options, out io.Writer, start time.Time, name string) (*s3stack.Stack, func() error, error) {
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
	s, err := s3stack.Start(ctx, s3stack.Options{Dir: dir, Nodes: []string{s3Node}, STS: true, Progress: func(f string, a ...any) {
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

// startS3OnNodes installs stowage-s3 on one real node through s3install, with the chart's dynamic provisioning
// on (scenario 10). The returned stop uninstalls it and stops the node.
func startS3OnNodes(ctx context.Context, opts Options, out io.Writer, start time.Time) (*s3install.Stack, func() error, error) {
	dir := ""
	if opts.Dir != "" {
		dir = filepath.Join(opts.Dir, "s3-install")
	}
	fmt.Fprintln(out)
	taint := []string{s3api.TaintAgentNotReady + "=true:NoExecute"}
	st, err := s3install.Start(ctx, s3install.Options{
		Nodes: []node.Spec{{Name: s3Node, Zone: "zone-a", Taints: taint}}, Dir: dir, Provisioner: true,
		Progress: func(f string, a ...any) {
			fmt.Fprintf(out, "==> S3: "+f+" [%s]\n", append(a, ebsstack.FormatDuration(time.Since(start)))...)
		},
	})
	if err != nil {
		return nil, nil, fmt.Errorf("install stowage-s3 on a real node: %w", err)
	}
	stop := func() error {
		fmt.Fprintln(out, "==> Tearing down the S3 install: helm uninstall, its Pods go, the node and control plane stop")
		return st.Stop(context.WithoutCancel(ctx))
	}
	return st, stop, nil
}

// s3Sharing is the S3 scenario on a real node: a bucket in versitygw behind a static PV, two busybox Pods on
// the node that share one Mountpoint Pod, a file written through one and read through the other, and both
// deleted with the Mountpoint Pod and the mounts gone.
func s3Sharing(ctx context.Context, st *s3install.Stack, report *ebsstack.Report) error {
	report.Scenario(s3Scenario)
	var pods [2]*v1.Pod
	var mountpointPod string
	data := "written through " + s3Apps[0] + ", read through " + s3Apps[1]
	steps := []step{
		{"bucket and static PV", func(ctx context.Context) (string, error) {
			if err := st.S3.CreateBucket(ctx, s3Bucket); err != nil {
				return "", err
			}
			if err := createStaticS3Volume(ctx, st, s3Volume, s3Bucket); err != nil {
				return "", err
			}
			return fmt.Sprintf("Bucket %s in versitygw, static PV %s (driver %s), PVC %s Bound", s3Bucket, s3Volume, s3api.DriverName, s3Volume), nil
		}},
		{"two Pods on one node", func(ctx context.Context) (string, error) {
			// The writer writes at once; the reader waits for the file, then prints it.
			scripts := [2]string{
				fmt.Sprintf("echo '%s' > /data/%s && echo written && exec sleep 3600", data, s3File),
				fmt.Sprintf("until [ -f /data/%[1]s ]; do sleep 1; done; cat /data/%[1]s && echo read-done && exec sleep 3600", s3File),
			}
			for i, name := range s3Apps {
				p, err := createS3Pod(ctx, st, name, s3Node, s3Volume, scripts[i])
				if err != nil {
					return "", err
				}
				pods[i] = p
			}
			for _, name := range s3Apps {
				if err := waitS3PodRunning(ctx, st, name); err != nil {
					return "", err
				}
			}
			return fmt.Sprintf("Pods %s and %s Running on real node %s (busybox), PVC %s mounted through FUSE", s3Apps[0], s3Apps[1], s3Node, s3Volume), nil
		}},
		{"one Mountpoint Pod", func(ctx context.Context) (string, error) {
			atts, err := s3install.ListAttachments(ctx, st.Dynamic)
			if err != nil {
				return "", err
			}
			if len(atts) != 1 || len(atts[0].Spec.MountpointS3PodAttachments) != 1 {
				return "", fmt.Errorf("attachments %+v, want one with one Mountpoint Pod", atts)
			}
			for mp, workloads := range atts[0].Spec.MountpointS3PodAttachments {
				var uids []string
				for _, w := range workloads {
					uids = append(uids, w.WorkloadPodUID)
				}
				for _, p := range pods {
					if !slices.Contains(uids, string(p.UID)) {
						return "", fmt.Errorf("mountpoint Pod %s serves %v, not %s (%s)", mp, uids, p.Name, p.UID)
					}
				}
				mountpointPod = mp
			}
			mp, err := st.Client.CoreV1().Pods(s3api.DefaultMountpointNamespace).Get(ctx, mountpointPod, metav1.GetOptions{})
			if err != nil {
				return "", err
			}
			if mp.Status.Phase != v1.PodRunning || mp.Spec.NodeName != s3Node {
				return "", fmt.Errorf("mountpoint Pod %s is %s on %q, want Running on %s", mountpointPod, mp.Status.Phase, mp.Spec.NodeName, s3Node)
			}
			return fmt.Sprintf("Both served by Mountpoint Pod %s/%s, Running on %s (MountpointS3PodAttachment %s)", s3api.DefaultMountpointNamespace, mountpointPod, s3Node, atts[0].Name), nil
		}},
		{"write and read", func(ctx context.Context) (string, error) {
			if err := waitS3PodLog(ctx, st, s3Apps[0], "written"); err != nil {
				return "", err
			}
			got, err := st.S3.GetObject(ctx, s3Bucket, s3File)
			if err != nil {
				return "", fmt.Errorf("object s3://%s/%s: %w", s3Bucket, s3File, err)
			}
			if string(got) != data+"\n" {
				return "", fmt.Errorf("object s3://%s/%s holds %q, want %q", s3Bucket, s3File, got, data+"\n")
			}
			if err := waitS3PodLog(ctx, st, s3Apps[1], data+"\nread-done"); err != nil {
				return "", err
			}
			return fmt.Sprintf("%s wrote %s (%d bytes), in versitygw as s3://%s/%s; %s read the same bytes", s3Apps[0], s3File, len(got), s3Bucket, s3File, s3Apps[1]), nil
		}},
		{"delete", func(ctx context.Context) (string, error) {
			if err := deleteS3Pods(ctx, st, s3Apps[:]...); err != nil {
				return "", err
			}
			if err := waitMountpointPodsGone(ctx, st); err != nil {
				return "", fmt.Errorf("mountpoint Pod %s: %w", mountpointPod, err)
			}
			n := st.Cluster.Nodes[0]
			for _, dir := range []string{"/var/lib/kubelet/plugins/" + s3api.DriverName + "/mnt/" + mountpointPod,
				"/var/lib/kubelet/pods/" + string(pods[0].UID), "/var/lib/kubelet/pods/" + string(pods[1].UID)} {
				left, err := nodeMountsUnder(n, dir)
				if err != nil {
					return "", err
				}
				if len(left) > 0 {
					return "", fmt.Errorf("mounts left on %s: %v", n.Name, left)
				}
			}
			return fmt.Sprintf("Pods deleted: Mountpoint Pod %s unmounted, ended and deleted; no attachment or mount left on %s", mountpointPod, s3Node), nil
		}},
	}
	return runSteps(ctx, report, steps)
}
