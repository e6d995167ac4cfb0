package s3install

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"

	"github.com/stowage-csi/stowage/shared/s3api"
)

// ListAttachments lists the cluster's MountpointS3PodAttachments, the S3 controller's record of which
// Mountpoint Pod serves which workload.
func ListAttachments(ctx context.Context, dyn dynamic.Interface) ([]s3api.MountpointS3PodAttachment, error) {
	l, err := dyn.Resource(s3api.GroupVersionResource()).List(ctx, metav1.ListOptions{})
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
