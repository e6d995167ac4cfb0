package ebse2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	// Namespace holds the scenarios' claims and Pods.
	Namespace = "default"
	// selectedNodeKey is what the scheduler sets on a WaitForFirstConsumer claim; there is no scheduler here.
	selectedNodeKey = "volume.kubernetes.io/selected-node"
	pauseImage      = "registry.k8s.io/pause:3.10"
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
