package demo

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stowage-csi/stowage/e2e/images"
	"github.com/stowage-csi/stowage/e2e/node"
	"github.com/stowage-csi/stowage/e2e/rig"
	"github.com/stowage-csi/stowage/e2e/s3install"
	"github.com/stowage-csi/stowage/e2e/s3server"
	"github.com/stowage-csi/stowage/shared/s3api"
)

const (
	s3NS = "default"
	// s3PodTimeout bounds a wait on real nodes: a Mountpoint Pod's start, and its removal, which the node
	// plugin's unmount sweep (every 2 minutes by default) finishes.
	s3PodTimeout = 4 * time.Minute
)

// createS3Pod creates a busybox Pod on nodeName with the claim at /data, running script.
func createS3Pod(ctx context.Context, st *s3install.Stack, name, nodeName, claim, script string) (*v1.Pod, error) {
	grace := int64(1) // busybox's sleep as PID 1 ignores SIGTERM
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s3NS},
		Spec: v1.PodSpec{
			RestartPolicy:                 v1.RestartPolicyNever,
			NodeSelector:                  map[string]string{"kubernetes.io/hostname": nodeName},
			TerminationGracePeriodSeconds: &grace,
			Containers: []v1.Container{{
				Name: "app", Image: images.BusyboxImage, Command: []string{"sh", "-c", script},
				VolumeMounts: []v1.VolumeMount{{Name: "data", MountPath: "/data"}},
			}},
			Volumes: []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{
				PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}},
		},
	}
	created, err := st.Client.CoreV1().Pods(s3NS).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("create Pod %s: %w", name, err)
	}
	return created, nil
}

// waitS3PodLog waits for the Pod's log to hold want; the error holds the last log read and, for a Pod that
// failed, says so.
func waitS3PodLog(ctx context.Context, st *s3install.Stack, name, want string) error {
	var logs []byte
	err := rig.WaitFor(ctx, s3PodTimeout, "Pod "+name+" to print "+strconv.Quote(want), func(ctx context.Context) (bool, error) {
		p, err := st.Client.CoreV1().Pods(s3NS).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		logs, _ = st.Client.CoreV1().Pods(s3NS).GetLogs(name, &v1.PodLogOptions{}).DoRaw(ctx)
		if p.Status.Phase == v1.PodFailed {
			return false, fmt.Errorf("pod %s failed: %s", name, logs)
		}
		return strings.Contains(string(logs), want), nil
	})
	if err != nil {
		return fmt.Errorf("%w; its log: %q", err, logs)
	}
	return nil
}

// deleteS3Pods deletes the Pods and waits for them to be gone.
func deleteS3Pods(ctx context.Context, st *s3install.Stack, names ...string) error {
	for _, name := range names {
		if err := st.Client.CoreV1().Pods(s3NS).Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete Pod %s: %w", name, err)
		}
	}
	for _, name := range names {
		err := rig.WaitFor(ctx, s3PodTimeout, "Pod "+name+" to go", func(ctx context.Context) (bool, error) {
			_, err := st.Client.CoreV1().Pods(s3NS).Get(ctx, name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return true, nil
			}
			return false, err
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// waitMountpointPodsGone waits until no Mountpoint Pod and no MountpointS3PodAttachment is left.
func waitMountpointPodsGone(ctx context.Context, st *s3install.Stack) error {
	return rig.WaitFor(ctx, s3PodTimeout, "the Mountpoint Pods and attachments to go", func(ctx context.Context) (bool, error) {
		pods, err := st.Client.CoreV1().Pods(s3api.DefaultMountpointNamespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		atts, err := s3install.ListAttachments(ctx, st.Dynamic)
		if err != nil {
			return false, err
		}
		return len(pods.Items) == 0 && len(atts) == 0, nil
	})
}

// nodeMountsUnder lists the mount points at or under dir in the real node's mount namespace, which the
// node's first process shows in its mountinfo.
func nodeMountsUnder(n *node.Node, dir string) ([]string, error) {
	return rig.MountPoints(fmt.Sprintf("/proc/%d/mountinfo", n.Pid()), func(mp string) bool {
		return mp == dir || strings.HasPrefix(mp, dir+"/")
	})
}

// createStaticS3Volume creates a static PV for the bucket with the S3 server's endpoint in its mount options,
// as upstream documents for S3-compatible servers, and a claim bound to it, and waits for it to be Bound.
func createStaticS3Volume(ctx context.Context, st *s3install.Stack, name, bucket string) error {
	size := resource.MustParse("1200Gi") // ignored by the driver, required by the API
	pv := &v1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1.PersistentVolumeSpec{
			Capacity:                      v1.ResourceList{v1.ResourceStorage: size},
			AccessModes:                   []v1.PersistentVolumeAccessMode{v1.ReadWriteMany},
			PersistentVolumeReclaimPolicy: v1.PersistentVolumeReclaimRetain,
			MountOptions:                  append(s3ServerOptions(st), "allow-delete"),
			ClaimRef:                      &v1.ObjectReference{Namespace: s3NS, Name: name},
			PersistentVolumeSource: v1.PersistentVolumeSource{CSI: &v1.CSIPersistentVolumeSource{
				Driver: s3api.DriverName, VolumeHandle: name + "-handle", VolumeAttributes: map[string]string{"bucketName": bucket},
			}},
		},
	}
	if _, err := st.Client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create PV %s: %w", name, err)
	}
	empty := ""
	pvc := &v1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s3NS},
		Spec: v1.PersistentVolumeClaimSpec{
			AccessModes: []v1.PersistentVolumeAccessMode{v1.ReadWriteMany}, StorageClassName: &empty, VolumeName: name,
			Resources: v1.VolumeResourceRequirements{Requests: v1.ResourceList{v1.ResourceStorage: size}},
		},
	}
	if _, err := st.Client.CoreV1().PersistentVolumeClaims(s3NS).Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create PVC %s: %w", name, err)
	}
	_, err := boundS3PV(ctx, st, name)
	return err
}

// s3ServerOptions are the mount options that point Mountpoint at the install's versitygw.
func s3ServerOptions(st *s3install.Stack) []string {
	return []string{"endpoint-url " + st.S3.Endpoint, "force-path-style", "region " + s3server.Region}
}

// boundS3PV waits until the claim is Bound and returns its PV.
func boundS3PV(ctx context.Context, st *s3install.Stack, claim string) (*v1.PersistentVolume, error) {
	var pv *v1.PersistentVolume
	err := rig.WaitFor(ctx, s3PodTimeout, "claim "+claim+" to be Bound", func(ctx context.Context) (bool, error) {
		c, err := st.Client.CoreV1().PersistentVolumeClaims(s3NS).Get(ctx, claim, metav1.GetOptions{})
		if err != nil || c.Status.Phase != v1.ClaimBound {
			return false, err
		}
		pv, err = st.Client.CoreV1().PersistentVolumes().Get(ctx, c.Spec.VolumeName, metav1.GetOptions{})
		return err == nil, err
	})
	return pv, err
}

// waitS3PodRunning waits for the Pod to be Running: the kubelet mounted its volume.
func waitS3PodRunning(ctx context.Context, st *s3install.Stack, name string) error {
	var phase v1.PodPhase
	err := rig.WaitFor(ctx, s3PodTimeout, "Pod "+name+" to be Running", func(ctx context.Context) (bool, error) {
		p, err := st.Client.CoreV1().Pods(s3NS).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		phase = p.Status.Phase
		return phase == v1.PodRunning, nil
	})
	if err != nil {
		return fmt.Errorf("%w; it is %s, its Events: %s", err, phase, s3PodEvents(ctx, st, name))
	}
	return nil
}

// s3PodEvents are the Pod's Events, one a line.
func s3PodEvents(ctx context.Context, st *s3install.Stack, name string) string {
	events, err := st.Client.CoreV1().Events(s3NS).List(context.WithoutCancel(ctx), metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, e := range events.Items {
		fmt.Fprintf(&b, "\n%s %s: %s", e.Type, e.Reason, e.Message)
	}
	return b.String()
}
