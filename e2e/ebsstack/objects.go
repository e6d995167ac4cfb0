package ebsstack

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"time"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stowage-csi/stowage/e2e/ec2sim"
	"github.com/stowage-csi/stowage/e2e/images"
)

const (
	// Namespace holds the scenarios' claims and Pods.
	Namespace = "default"
	// selectedNodeKey is what the scheduler sets on a WaitForFirstConsumer claim; there is no scheduler here.
	selectedNodeKey = "volume.kubernetes.io/selected-node"
	// pauseImage is the one the real nodes hold (kubeletsim runs no container for it).
	pauseImage = images.PauseImage
)

// StorageClass is a WaitForFirstConsumer class of the EBS driver with reclaim policy Delete.
func StorageClass(name string, params map[string]string) *storagev1.StorageClass {
	del := v1.PersistentVolumeReclaimDelete
	wffc := storagev1.VolumeBindingWaitForFirstConsumer
	expand := true
	return &storagev1.StorageClass{
		ObjectMeta: metav1.ObjectMeta{Name: name}, Provisioner: Driver, Parameters: params,
		ReclaimPolicy: &del, VolumeBindingMode: &wffc, AllowVolumeExpansion: &expand,
	}
}

// Claim is a ReadWriteOnce claim of size for class, already carrying the scheduler's node choice.
func Claim(name, class, size, node string, block bool) *v1.PersistentVolumeClaim {
	c := &v1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: Namespace, Annotations: map[string]string{selectedNodeKey: node}},
		Spec: v1.PersistentVolumeClaimSpec{
			StorageClassName: &class,
			AccessModes:      []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
			Resources:        v1.VolumeResourceRequirements{Requests: v1.ResourceList{v1.ResourceStorage: resource.MustParse(size)}},
		},
	}
	if block {
		mode := v1.PersistentVolumeBlock
		c.Spec.VolumeMode = &mode
	}
	return c
}

// Pod is a Pod bound to node (as the scheduler would bind it) using claim at /data, or as the raw device
// /dev/xvdf when block is set.
func Pod(name, node, claim string, block bool) *v1.Pod {
	c := v1.Container{Name: "app", Image: pauseImage}
	if block {
		c.VolumeDevices = []v1.VolumeDevice{{Name: "data", DevicePath: "/dev/xvdf"}}
	} else {
		c.VolumeMounts = []v1.VolumeMount{{Name: "data", MountPath: "/data"}}
	}
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: Namespace},
		Spec: v1.PodSpec{
			NodeName:   node,
			Containers: []v1.Container{c},
			Volumes: []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{
				PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: claim},
			}}},
		},
	}
}

// AttachmentName is the name the attach-detach controller gives the VolumeAttachment of volumeHandle on node.
func AttachmentName(volumeHandle, node string) string {
	sum := sha256.Sum256([]byte(volumeHandle + Driver + node))
	return "csi-" + hex.EncodeToString(sum[:])
}

// poll calls cond every interval until it reports done, returns an error, or ctx ends; the error then
// names what was awaited and the last state seen.
func poll(ctx context.Context, what string, cond func(ctx context.Context) (done bool, state string, err error)) error {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	last := ""
	for {
		done, state, err := cond(ctx)
		if err != nil {
			return err
		}
		if done {
			return nil
		}
		last = state
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w (last seen: %s)", what, ctx.Err(), last)
		case <-t.C:
		}
	}
}

// filesystemClass is a gp3 StorageClass whose volumes are formatted with fsType.
func filesystemClass(name, fsType string) *storagev1.StorageClass {
	return StorageClass(name, map[string]string{"type": "gp3", "csi.storage.k8s.io/fstype": fsType})
}

// create creates class, claim and pod, in that order, skipping those that are nil, and returns the
// created claim (nil when there is none).
func (l *Lifecycle) create(ctx context.Context, class *storagev1.StorageClass, claim *v1.PersistentVolumeClaim, pod *v1.Pod) (*v1.PersistentVolumeClaim, error) {
	kube := l.P.KubeClient()
	if class != nil {
		if _, err := kube.StorageV1().StorageClasses().Create(ctx, class, metav1.CreateOptions{}); err != nil {
			return nil, err
		}
	}
	var created *v1.PersistentVolumeClaim
	if claim != nil {
		var err error
		if created, err = kube.CoreV1().PersistentVolumeClaims(Namespace).Create(ctx, claim, metav1.CreateOptions{}); err != nil {
			return nil, err
		}
	}
	if pod != nil {
		if _, err := kube.CoreV1().Pods(Namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			return nil, err
		}
	}
	return created, nil
}

// createAndStart creates class (unless nil), claim and pod, waits for the claim to be Bound, checks its
// volume with checkVolume (unless nil) and waits for the Pod to run.
func (l *Lifecycle) createAndStart(ctx context.Context, class *storagev1.StorageClass, claim *v1.PersistentVolumeClaim, pod *v1.Pod,
	checkVolume func(ec2sim.VolumeState) error) (*v1.PersistentVolume, ec2sim.VolumeState, *v1.Pod, error) {
	if _, err := l.create(ctx, class, claim, pod); err != nil {
		return nil, ec2sim.VolumeState{}, nil, err
	}
	pv, vol, err := l.waitBound(ctx, claim.Name)
	if err != nil {
		return nil, ec2sim.VolumeState{}, nil, err
	}
	if checkVolume != nil {
		if err := checkVolume(vol); err != nil {
			return nil, ec2sim.VolumeState{}, nil, err
		}
	}
	running, err := l.waitRunning(ctx, pod.Name)
	if err != nil {
		return nil, ec2sim.VolumeState{}, nil, err
	}
	return pv, vol, running, nil
}

// publishedFile is the path, on node's kubelet, of file in the scenario volume as published to pod.
func (l *Lifecycle) publishedFile(ctx context.Context, node, pod, file string) (string, error) {
	p, err := l.P.KubeClient().CoreV1().Pods(Namespace).Get(ctx, pod, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	return filepath.Join(l.node(node).PublishPath(string(p.UID), l.pvName), file), nil
}

// deleteAll deletes every object list returns (one already gone counts as deleted) and returns their names.
func deleteAll(ctx context.Context, list func(context.Context) ([]string, error), del func(ctx context.Context, name string) error) ([]string, error) {
	names, err := list(ctx)
	if err != nil {
		return nil, err
	}
	for _, n := range names {
		if err := del(ctx, n); err != nil && !apierrors.IsNotFound(err) {
			return nil, err
		}
	}
	return names, nil
}

// objectNames maps items to their names.
func objectNames[T any](items []T, name func(T) string) []string {
	var out []string
	for _, it := range items {
		out = append(out, name(it))
	}
	return out
}
