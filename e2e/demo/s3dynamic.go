package demo

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	v1 "k8s.io/api/core/v1"

	"github.com/stowage-csi/stowage/e2e/ebsstack"
	"github.com/stowage-csi/stowage/e2e/s3stack"
)

// The dynamic provisioning scenario's objects.
const (
	s3DynScenario = "10. S3: dynamic provisioning, a prefix per claim"
	s3DynBucket   = "demo-shared-bucket"
	s3DynClass    = "s3-prefix-per-claim"
	s3DynClaim    = "s3-dynamic"
	s3DynPod      = "s3-dyn-app"
)

// s3Dynamic is upstream's most requested feature (mountpoint-s3-csi-driver#125): a StorageClass names one
// shared bucket, each claim gets its own prefix there from s3-controller's CSI controller service (run with
// Stowage's csi-provisioner), a Pod writes into it, and deleting the claim removes that prefix's objects
// because the class says so, leaving the rest of the bucket alone.
func s3Dynamic(ctx context.Context, s *s3stack.Stack, report *ebsstack.Report) error {
	report.Scenario(s3DynScenario)
	var pv *v1.PersistentVolume
	var pod *v1.Pod
	prefix := ""
	const keep = "not-a-volume/keep.txt"
	steps := []step{
		{"class and claim", func(ctx context.Context) (string, error) {
			if err := s.S3.CreateBucket(ctx, s3DynBucket); err != nil {
				return "", err
			}
			if err := s.S3.PutObject(ctx, s3DynBucket, keep, []byte("outside every volume\n")); err != nil {
				return "", err
			}
			params := map[string]string{"bucketName": s3DynBucket, "prefix": "claims/${pvc.namespace}", "deleteObjectsOnDelete": "true"}
			if err := s.CreateClass(ctx, s3DynClass, params, "allow-delete"); err != nil {
				return "", err
			}
			if err := s.CreateClaim(ctx, s3DynClaim, s3DynClass); err != nil {
				return "", err
			}
			var err error
			if pv, err = s.BoundPV(ctx, s3DynClaim); err != nil {
				return "", err
			}
			prefix = pv.Spec.CSI.VolumeAttributes["prefix"]
			return fmt.Sprintf("StorageClass %s (bucket %s); PVC %s Bound to %s, its own prefix s3://%s/%s", s3DynClass, s3DynBucket, s3DynClaim, pv.Name, s3DynBucket, prefix), nil
		}},
		{"write into the prefix", func(ctx context.Context) (string, error) {
			if _, err := s.CreateWorkload(ctx, s3stack.Workload{Name: s3DynPod, Node: s3Node, Claim: s3DynClaim}); err != nil {
				return "", err
			}
			var err error
			if pod, err = s.WaitRunning(ctx, s3DynPod); err != nil {
				return "", err
			}
			data := []byte("a file in a dynamically provisioned S3 volume\n")
			dir := s.Nodes[s3Node].Kubelet.PublishPath(string(pod.UID), pv.Name)
			if err := os.WriteFile(filepath.Join(dir, s3File), data, 0o644); err != nil {
				return "", err
			}
			if err := s.WaitObject(ctx, s3DynBucket, prefix+s3File, data); err != nil {
				return "", err
			}
			return fmt.Sprintf("Pod %s wrote %s; it is s3://%s/%s%s", s3DynPod, s3File, s3DynBucket, prefix, s3File), nil
		}},
		{"delete claim and prefix", func(ctx context.Context) (string, error) {
			if err := s.DeleteWorkload(ctx, s3DynPod); err != nil {
				return "", err
			}
			if err := s.DeleteClaim(ctx, s3DynClaim, pv.Name); err != nil {
				return "", err
			}
			keys, err := s.ListKeys(ctx, s3DynBucket, "")
			if err != nil {
				return "", err
			}
			if !slices.Equal(keys, []string{keep}) {
				return "", fmt.Errorf("bucket %s holds %v after the claim's deletion, want only %s", s3DynBucket, keys, keep)
			}
			return fmt.Sprintf("Pod and PVC deleted: PV %s gone, the objects under %s deleted (deleteObjectsOnDelete), %s kept", pv.Name, prefix, keep), nil
		}},
	}
	return runSteps(ctx, report, steps)
}
