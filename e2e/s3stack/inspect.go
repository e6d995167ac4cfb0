package s3stack

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/stowage-csi/stowage/shared/s3api"
)

// Attachments lists the MountpointS3PodAttachments.
func (s *Stack) Attachments(ctx context.Context) ([]s3api.MountpointS3PodAttachment, error) {
	l, err := s.Dynamic.Resource(s3api.GroupVersionResource()).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list attachments: %w", err)
	}
	out := make([]s3api.MountpointS3PodAttachment, len(l.Items))
	for i := range l.Items {
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(l.Items[i].Object, &out[i]); err != nil {
			return nil, fmt.Errorf("attachment %s: %w", l.Items[i].GetName(), err)
		}
	}
	return out, nil
}

// ServingPod returns the Mountpoint Pod that serves the workload with this UID and the attachment naming
// it, or empty strings while no attachment does.
func (s *Stack) ServingPod(ctx context.Context, workloadUID string) (mountpointPod, attachment string, err error) {
	atts, err := s.Attachments(ctx)
	if err != nil {
		return "", "", err
	}
	for _, a := range atts {
		if mp := a.MountpointPodFor(workloadUID); mp != "" {
			return mp, a.Name, nil
		}
	}
	return "", "", nil
}
