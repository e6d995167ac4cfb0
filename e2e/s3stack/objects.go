package s3stack

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/stowage-csi/stowage/shared/s3api"
)

// StepTimeout bounds each wait of the helpers below.
const StepTimeout = 2 * time.Minute

// Volume describes a static S3 volume: a PV of the driver and a claim bound to it.
type Volume struct {
	// Name names the PV and the claim (in namespace default).
	Name string
	// Bucket is the bucket; created if missing.
	Bucket string
	// MountOptions are the PV's mountOptions besides the S3 server's endpoint options, which are added.
	MountOptions []string
	// Attributes are extra volume attributes.
	Attributes map[string]string
	// ReadOnlyMany makes the PV and claim ReadOnlyMany instead of ReadWriteMany.
	ReadOnlyMany bool
}

// ServerOptions are the mount options that point Mountpoint at the stack's S3 server.
func (s *Stack) ServerOptions() []string {
	return []string{"endpoint-url " + s.S3.Endpoint, "force-path-style", "region us-east-1"}
}

// CreateVolume creates the bucket (if missing), a PV of the driver with the volume's options, and a claim
// bound to it by name, and waits until the claim is Bound.
func (s *Stack) CreateVolume(ctx context.Context, vol Volume) error {
	if err := s.S3.CreateBucket(ctx, vol.Bucket); err != nil && !isBucketOwned(err) {
		return fmt.Errorf("create bucket %s: %w", vol.Bucket, err)
	}
	mode := v1.ReadWriteMany
	if vol.ReadOnlyMany {
		mode = v1.ReadOnlyMany
	}
	attrs := map[string]string{"bucketName": vol.Bucket}
	for k, v := range vol.Attributes {
		attrs[k] = v
	}
	size := resource.MustParse("1200Gi") // ignored by the driver, required by the API
	pv := &v1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: vol.Name},
		Spec: v1.PersistentVolumeSpec{
			Capacity:                      v1.ResourceList{v1.ResourceStorage: size},
			AccessModes:                   []v1.PersistentVolumeAccessMode{mode},
			PersistentVolumeReclaimPolicy: v1.PersistentVolumeReclaimRetain,
			StorageClassName:              "",
			MountOptions:                  append(s.ServerOptions(), vol.MountOptions...),
			ClaimRef:                      &v1.ObjectReference{Namespace: "default", Name: vol.Name},
			PersistentVolumeSource: v1.PersistentVolumeSource{CSI: &v1.CSIPersistentVolumeSource{
				Driver: s3api.DriverName, VolumeHandle: vol.Name + "-handle", VolumeAttributes: attrs,
			}},
		},
	}
	if _, err := s.Client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create PV %s: %w", vol.Name, err)
	}
	empty := ""
	pvc := &v1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: vol.Name, Namespace: "default"},
		Spec: v1.PersistentVolumeClaimSpec{
			AccessModes:      []v1.PersistentVolumeAccessMode{mode},
			StorageClassName: &empty,
			VolumeName:       vol.Name,
			Resources:        v1.VolumeResourceRequirements{Requests: v1.ResourceList{v1.ResourceStorage: size}},
		},
	}
	if _, err := s.Client.CoreV1().PersistentVolumeClaims("default").Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create claim %s: %w", vol.Name, err)
	}
	return s.poll(ctx, "claim "+vol.Name+" Bound", func(ctx context.Context) (bool, error) {
		c, err := s.Client.CoreV1().PersistentVolumeClaims("default").Get(ctx, vol.Name, metav1.GetOptions{})
		return err == nil && c.Status.Phase == v1.ClaimBound, nil
	})
}

func isBucketOwned(err error) bool {
	return strings.Contains(err.Error(), "BucketAlreadyOwnedByYou") || strings.Contains(err.Error(), "BucketAlreadyExists")
}

// Workload describes a workload Pod using one claim.
type Workload struct {
	Name, Node, Claim string
	// FSGroup, when set, is the Pod's securityContext.fsGroup.
	FSGroup *int64
	// ReadOnly mounts the claim read-only.
	ReadOnly bool
}

// VolumeName is the Pod volume name the stack's workloads use.
const VolumeName = "data"

// CreateWorkload creates the workload Pod bound to its node.
func (s *Stack) CreateWorkload(ctx context.Context, w Workload) (*v1.Pod, error) {
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: w.Name, Namespace: "default"},
		Spec: v1.PodSpec{
			NodeName:   w.Node,
			Containers: []v1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}},
			Volumes: []v1.Volume{{Name: VolumeName, VolumeSource: v1.VolumeSource{
				PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: w.Claim, ReadOnly: w.ReadOnly},
			}}},
		},
	}
	if w.FSGroup != nil {
		pod.Spec.SecurityContext = &v1.PodSecurityContext{FSGroup: w.FSGroup}
	}
	return s.Client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{})
}

// WaitRunning waits until the workload Pod is Running (its volume published) and returns it.
func (s *Stack) WaitRunning(ctx context.Context, name string) (*v1.Pod, error) {
	var pod *v1.Pod
	err := s.poll(ctx, "Pod "+name+" Running", func(ctx context.Context) (bool, error) {
		p, err := s.Client.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		pod = p
		return p.Status.Phase == v1.PodRunning, nil
	})
	return pod, err
}

// DeleteWorkload deletes a workload Pod and waits until it is gone (its volume unpublished).
func (s *Stack) DeleteWorkload(ctx context.Context, name string) error {
	err := s.Client.CoreV1().Pods("default").Delete(ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return s.poll(ctx, "Pod "+name+" gone", func(ctx context.Context) (bool, error) {
		_, err := s.Client.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}

// PublishPath is where the workload's volume is mounted on its node's host. The kubelet names a claim's
// directory after the PV, which CreateVolume names as the claim.
func (s *Stack) PublishPath(pod *v1.Pod) string {
	return s.Nodes[pod.Spec.NodeName].Kubelet.PublishPath(string(pod.UID), pod.Spec.Volumes[0].PersistentVolumeClaim.ClaimName)
}

// MountpointPods lists the Mountpoint Pods (in the Mountpoint namespace).
func (s *Stack) MountpointPods(ctx context.Context) ([]v1.Pod, error) {
	l, err := s.Client.CoreV1().Pods(s3api.DefaultMountpointNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	return l.Items, nil
}

// poll calls cond every 100 ms until it holds, at most StepTimeout.
func (s *Stack) poll(ctx context.Context, what string, cond func(context.Context) (bool, error)) error {
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, StepTimeout, true, cond)
	if err != nil {
		return fmt.Errorf("wait for %s: %w", what, err)
	}
	return nil
}

// Int64 returns a pointer to v, for Workload.FSGroup.
func Int64(v int64) *int64 { return &v }

// WaitObject waits until the bucket holds key with exactly want. A file written through a mount becomes an
// object when s3-fuse completes its upload: at close(2) if the closing thread is the opener's process, else
// at the kernel's asynchronous release. Inside the Mountpoint Pod's PID namespace s3-fuse cannot map a
// writer's thread to its process, so a Go writer whose close runs on another thread than its open (as
// in these tests) sees the object only a moment after close returns.
func (s *Stack) WaitObject(ctx context.Context, bucket, key string, want []byte) error {
	var last string
	err := s.poll(ctx, "object "+bucket+"/"+key, func(ctx context.Context) (bool, error) {
		got, err := s.S3.GetObject(ctx, bucket, key)
		if err != nil {
			last = err.Error()
			return false, nil
		}
		last = fmt.Sprintf("%d bytes", len(got))
		return bytes.Equal(got, want), nil
	})
	if err != nil {
		return fmt.Errorf("%w (last: %s)", err, last)
	}
	return nil
}
