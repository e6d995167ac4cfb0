package s3stack

import (
	"context"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stowage-csi/stowage/shared/s3api"
)

// CreateInlineWorkload creates a workload Pod bound to node, running as ServiceAccount sa, with a CSI inline
// volume of the driver (VolumeName) with the given attributes.
func (s *Stack) CreateInlineWorkload(ctx context.Context, name, node, sa string, attrs map[string]string) (*v1.Pod, error) {
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: v1.PodSpec{
			NodeName: node, ServiceAccountName: sa,
			Containers: []v1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}},
			Volumes: []v1.Volume{{Name: VolumeName, VolumeSource: v1.VolumeSource{
				CSI: &v1.CSIVolumeSource{Driver: s3api.DriverName, VolumeAttributes: attrs},
			}}},
		},
	}
	return s.Client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{})
}
