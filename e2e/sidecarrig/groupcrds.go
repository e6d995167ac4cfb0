package sidecarrig

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensions "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"

	"github.com/stowage-csi/stowage/e2e/cluster"
)

// establishTimeout bounds the wait for the API server to serve a freshly created CRD.
const establishTimeout = time.Minute

// installGroupCRDs creates the group snapshot CRDs of dir (deploy/crds, which the snapshot-controller's
// package test keeps byte-identical to the snapshot client module's) and waits until each is Established.
func installGroupCRDs(ctx context.Context, c *cluster.Cluster, dir string) error {
	client, err := apiextensions.NewForConfig(c.RESTConfig())
	if err != nil {
		return err
	}
	crds := client.ApiextensionsV1().CustomResourceDefinitions()
	for _, kind := range []string{"volumegroupsnapshotclasses", "volumegroupsnapshotcontents", "volumegroupsnapshots"} {
		file := filepath.Join(dir, "groupsnapshot.storage.k8s.io_"+kind+".yaml")
		data, err := os.ReadFile(file)
		if err != nil {
			return err
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(data, crd); err != nil {
			return fmt.Errorf("decode %s: %w", file, err)
		}
		if _, err := crds.Create(ctx, crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create CRD %s: %w", crd.Name, err)
		}
		err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, establishTimeout, true, func(ctx context.Context) (bool, error) {
			got, err := crds.Get(ctx, crd.Name, metav1.GetOptions{})
			if err != nil {
				return false, nil // retried until the timeout, which reports it
			}
			for _, cond := range got.Status.Conditions {
				if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			return fmt.Errorf("wait for CRD %s to be Established: %w", crd.Name, err)
		}
	}
	return nil
}
