package s3stack

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stowage-csi/stowage/shared/s3api"
)

// CreateClass creates a StorageClass of the driver (dynamic provisioning, Options.Provisioner) with the
// given parameters, reclaim policy Delete and mount options that point Mountpoint at the stack's S3 server.
func (s *Stack) CreateClass(ctx context.Context, name string, params map[string]string, mountOptions ...string) error {
	del := v1.PersistentVolumeReclaimDelete
	sc := &storagev1.StorageClass{
		ObjectMeta: metav1.ObjectMeta{Name: name}, Provisioner: s3api.DriverName, Parameters: params,
		ReclaimPolicy: &del, MountOptions: append(s.ServerOptions(), mountOptions...),
	}
	_, err := s.Client.StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{})
	return err
}

// CreateClaim creates a ReadWriteMany claim of the class in namespace default.
func (s *Stack) CreateClaim(ctx context.Context, name, class string) error {
	pvc := &v1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: v1.PersistentVolumeClaimSpec{
			AccessModes: []v1.PersistentVolumeAccessMode{v1.ReadWriteMany}, StorageClassName: &class,
			Resources: v1.VolumeResourceRequirements{Requests: v1.ResourceList{v1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	if _, err := s.Client.CoreV1().PersistentVolumeClaims("default").Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create claim %s: %w", name, err)
	}
	return nil
}

// BoundPV waits until the claim is Bound and returns its PV.
func (s *Stack) BoundPV(ctx context.Context, claim string) (*v1.PersistentVolume, error) {
	var pv *v1.PersistentVolume
	err := s.poll(ctx, "claim "+claim+" Bound", func(ctx context.Context) (bool, error) {
		c, err := s.Client.CoreV1().PersistentVolumeClaims("default").Get(ctx, claim, metav1.GetOptions{})
		if err != nil || c.Status.Phase != v1.ClaimBound {
			return false, nil
		}
		pv, err = s.Client.CoreV1().PersistentVolumes().Get(ctx, c.Spec.VolumeName, metav1.GetOptions{})
		return err == nil, nil
	})
	return pv, err
}

// DeleteClaim deletes a claim and waits until its PV is gone (the provisioner's DeleteVolume returned).
func (s *Stack) DeleteClaim(ctx context.Context, claim, pv string) error {
	if err := s.Client.CoreV1().PersistentVolumeClaims("default").Delete(ctx, claim, metav1.DeleteOptions{}); err != nil {
		return err
	}
	return s.poll(ctx, "PV "+pv+" deleted", func(ctx context.Context) (bool, error) {
		_, err := s.Client.CoreV1().PersistentVolumes().Get(ctx, pv, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}

// ListKeys lists a bucket's keys under prefix, sorted.
func (s *Stack) ListKeys(ctx context.Context, bucket, prefix string) ([]string, error) {
	return s.S3.ListKeys(ctx, bucket, prefix)
}
