package reconciler

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stowage-csi/stowage/shared/s3api"
)

// Field indexes of the informer cache. The fake client in tests gets the same ones through IndexFuncs.
const (
	// indexSharingKey finds the attachment of a sharing key in one lookup (see sharingKey).
	indexSharingKey = "stowage.sharingKey"
	// indexMountpointPod finds the attachments naming a Mountpoint Pod.
	indexMountpointPod = "stowage.mountpointPod"
	// indexWorkloadUID finds the attachments holding a workload UID.
	indexWorkloadUID = "stowage.workloadUID"
	// indexPodUID finds a Pod by UID (attachments name workloads by UID only).
	indexPodUID = "metadata.uid"
)

// Index is one field index: the object type, the field name and the function computing its values.
type Index struct {
	Object client.Object
	Field  string
	Func   client.IndexerFunc
}

// IndexFuncs returns the indexes the reconciler needs, for the manager's cache and for fake clients.
func IndexFuncs() []Index {
	return []Index{
		{&s3api.MountpointS3PodAttachment{}, indexSharingKey, func(o client.Object) []string {
			return []string{sharingKey(&o.(*s3api.MountpointS3PodAttachment).Spec)}
		}},
		// upstream's node plugin filters by spec.nodeName; the index keeps that lookup cheap here too.
		{&s3api.MountpointS3PodAttachment{}, s3api.FieldNodeName, func(o client.Object) []string {
			return []string{o.(*s3api.MountpointS3PodAttachment).Spec.NodeName}
		}},
		{&s3api.MountpointS3PodAttachment{}, indexMountpointPod, func(o client.Object) []string {
			var names []string
			for name := range o.(*s3api.MountpointS3PodAttachment).Spec.MountpointS3PodAttachments {
				names = append(names, name)
			}
			return names
		}},
		{&s3api.MountpointS3PodAttachment{}, indexWorkloadUID, func(o client.Object) []string {
			var uids []string
			for _, ws := range o.(*s3api.MountpointS3PodAttachment).Spec.MountpointS3PodAttachments {
				for _, w := range ws {
					uids = append(uids, w.WorkloadPodUID)
				}
			}
			return uids
		}},
		{&corev1.Pod{}, indexPodUID, func(o client.Object) []string { return []string{string(o.GetUID())} }},
	}
}

// RegisterIndexes adds IndexFuncs to a manager's field indexer.
func RegisterIndexes(ctx context.Context, indexer client.FieldIndexer) error {
	for _, ix := range IndexFuncs() {
		if err := indexer.IndexField(ctx, ix.Object, ix.Field, ix.Func); err != nil {
			return fmt.Errorf("index %T by %s: %w", ix.Object, ix.Field, err)
		}
	}
	return nil
}
