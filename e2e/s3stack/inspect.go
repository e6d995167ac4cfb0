package s3stack

import (
	"context"

	"github.com/stowage-csi/stowage/e2e/s3install"
	"github.com/stowage-csi/stowage/shared/s3api"
)

// Attachments lists the MountpointS3PodAttachments.
func (s *Stack) Attachments(ctx context.Context) ([]s3api.MountpointS3PodAttachment, error) {
	return s3install.ListAttachments(ctx, s.Dynamic)
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
