//go:build e2e

package csisnapshotter

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
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

// groupCRDFiles are the group snapshot CRDs, in the snapshot client module's config/crd folder beside the
// three the rig's cluster.InstallSnapshotCRDs installs.
var groupCRDFiles = []string{
	"config/crd/groupsnapshot.storage.k8s.io_volumegroupsnapshotclasses.yaml",
	"config/crd/groupsnapshot.storage.k8s.io_volumegroupsnapshotcontents.yaml",
	"config/crd/groupsnapshot.storage.k8s.io_volumegroupsnapshots.yaml",
}

// installGroupCRDs creates the group snapshot CRDs of the e2e module's snapshot client version and waits until
// each is Established.
func installGroupCRDs(ctx context.Context, c *cluster.Cluster) error {
	cmd := exec.CommandContext(ctx, "go", "list", "-m", "-json", cluster.SnapshotClientModule)
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("go list -m %s: %w", cluster.SnapshotClientModule, err)
	}
	var mod struct{ Dir string }
	if err := json.Unmarshal(out, &mod); err != nil || mod.Dir == "" {
		return fmt.Errorf("go list -m %s: no module directory (%v); is the module downloaded?", cluster.SnapshotClientModule, err)
	}
	client, err := apiextensions.NewForConfig(c.RESTConfig())
	if err != nil {
		return err
	}
	crds := client.ApiextensionsV1().CustomResourceDefinitions()
	for _, rel := range groupCRDFiles {
		data, err := os.ReadFile(filepath.Join(mod.Dir, rel))
		if err != nil {
			return err
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(data, crd); err != nil {
			return fmt.Errorf("decode %s: %w", rel, err)
		}
		if _, err := crds.Create(ctx, crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create CRD %s: %w", crd.Name, err)
		}
		err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
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
