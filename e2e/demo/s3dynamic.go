package demo

import (
	"context"
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stowage-csi/stowage/e2e/ebsstack"
	"github.com/stowage-csi/stowage/e2e/rig"
	"github.com/stowage-csi/stowage/e2e/s3install"
	"github.com/stowage-csi/stowage/shared/s3api"
)

// The dynamic provisioning scenario's objects.
const (
	s3DynScenario = "10. S3: dynamic provisioning, a prefix per claim"
	s3DynBucket   = "demo-shared-bucket"
	s3DynClass    = "s3-prefix-per-claim"
	s3DynClaim    = "s3-dynamic"
	s3DynPod      = "s3-dyn-app"
)

// s3Dynamic is upstream's most requested feature (mountpoint-s3-csi-driver#125), on a real node: a
// StorageClass names one shared bucket, each claim gets its own prefix there from the chart's s3-controller
// and csi-provisioner, a busybox Pod writes into it, and deleting the claim removes that prefix's objects
// because the class says so, leaving the rest of the bucket alone.
func s3Dynamic(ctx context.Context, st *s3install.Stack, report *ebsstack.Report) error {
	report.Scenario(s3DynScenario)
	var pv *v1.PersistentVolume
	prefix := ""
	const keep = "not-a-volume/keep.txt"
	data := "a file in a dynamically provisioned S3 volume"
	steps := []step{
		{"class and claim", func(ctx context.Context) (string, error) {
			if err := st.S3.CreateBucket(ctx, s3DynBucket); err != nil {
				return "", err
			}
			if err := st.S3.PutObject(ctx, s3DynBucket, keep, []byte("outside every volume\n")); err != nil {
				return "", err
			}
			del := v1.PersistentVolumeReclaimDelete
			sc := &storagev1.StorageClass{
				ObjectMeta: metav1.ObjectMeta{Name: s3DynClass}, Provisioner: s3api.DriverName, ReclaimPolicy: &del,
				Parameters:   map[string]string{"bucketName": s3DynBucket, "prefix": "claims/${pvc.namespace}", "deleteObjectsOnDelete": "true"},
				MountOptions: append(s3ServerOptions(st), "allow-delete"),
			}
			if _, err := st.Client.StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{}); err != nil {
				return "", fmt.Errorf("create StorageClass %s: %w", s3DynClass, err)
			}
			pvc := &v1.PersistentVolumeClaim{
				ObjectMeta: metav1.ObjectMeta{Name: s3DynClaim, Namespace: s3NS},
				Spec: v1.PersistentVolumeClaimSpec{
					AccessModes: []v1.PersistentVolumeAccessMode{v1.ReadWriteMany}, StorageClassName: &sc.Name,
					Resources: v1.VolumeResourceRequirements{Requests: v1.ResourceList{v1.ResourceStorage: resource.MustParse("1Gi")}},
				},
			}
			if _, err := st.Client.CoreV1().PersistentVolumeClaims(s3NS).Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
				return "", fmt.Errorf("create PVC %s: %w", s3DynClaim, err)
			}
			var err error
			if pv, err = boundS3PV(ctx, st, s3DynClaim); err != nil {
				return "", err
			}
			prefix = pv.Spec.CSI.VolumeAttributes["prefix"]
			return fmt.Sprintf("StorageClass %s (bucket %s); PVC %s Bound to %s by the chart's csi-provisioner, its own prefix s3://%s/%s", s3DynClass, s3DynBucket, s3DynClaim, pv.Name, s3DynBucket, prefix), nil
		}},
		{"write into the prefix", func(ctx context.Context) (string, error) {
			script := fmt.Sprintf("echo '%s' > /data/%s && echo written && exec sleep 3600", data, s3File)
			if _, err := createS3Pod(ctx, st, s3DynPod, s3Node, s3DynClaim, script); err != nil {
				return "", err
			}
			if err := waitS3PodLog(ctx, st, s3DynPod, "written"); err != nil {
				return "", err
			}
			got, err := st.S3.GetObject(ctx, s3DynBucket, prefix+s3File)
			if err != nil {
				return "", fmt.Errorf("object s3://%s/%s%s: %w", s3DynBucket, prefix, s3File, err)
			}
			if string(got) != data+"\n" {
				return "", fmt.Errorf("object s3://%s/%s%s holds %q, want %q", s3DynBucket, prefix, s3File, got, data+"\n")
			}
			return fmt.Sprintf("Pod %s on %s wrote %s; it is s3://%s/%s%s", s3DynPod, s3Node, s3File, s3DynBucket, prefix, s3File), nil
		}},
		{"delete claim and prefix", func(ctx context.Context) (string, error) {
			if err := deleteS3Pods(ctx, st, s3DynPod); err != nil {
				return "", err
			}
			// The Mountpoint Pod goes before the claim: the volume it serves is the claim's.
			if err := waitMountpointPodsGone(ctx, st); err != nil {
				return "", err
			}
			if err := st.Client.CoreV1().PersistentVolumeClaims(s3NS).Delete(ctx, s3DynClaim, metav1.DeleteOptions{}); err != nil {
				return "", err
			}
			err := rig.WaitFor(ctx, s3PodTimeout, "PV "+pv.Name+" to be deleted", func(ctx context.Context) (bool, error) {
				_, err := st.Client.CoreV1().PersistentVolumes().Get(ctx, pv.Name, metav1.GetOptions{})
				if apierrors.IsNotFound(err) {
					return true, nil
				}
				return false, err
			})
			if err != nil {
				return "", err
			}
			keys, err := st.S3.ListKeys(ctx, s3DynBucket, "")
			if err != nil {
				return "", err
			}
			if !slices.Equal(keys, []string{keep}) {
				return "", fmt.Errorf("bucket %s holds %v after the claim's deletion, want only %s", s3DynBucket, keys, keep)
			}
			return fmt.Sprintf("Pod deleted, its Mountpoint Pod gone; PVC deleted: PV %s gone, the objects under %s deleted (deleteObjectsOnDelete), %s kept", pv.Name, prefix, keep), nil
		}},
	}
	return runSteps(ctx, report, steps)
}
