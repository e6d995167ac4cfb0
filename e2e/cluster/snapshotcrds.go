package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensions "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
	"sigs.k8s.io/yaml"
)

// SnapshotClientModule ships the snapshot.storage.k8s.io CRD manifests in its config/crd folder. Its version
// is whatever the e2e module's build list selects, so the CRDs always match the client the tests use.
const SnapshotClientModule = "github.com/kubernetes-csi/external-snapshotter/client/v8"

// snapshotCRDFiles are the VolumeSnapshot CRDs, relative to the module directory of SnapshotClientModule.
// The group-snapshot CRDs next to them are left out: nothing in the rig uses them.
func snapshotCRDFiles() []string {
	return []string{
		"config/crd/snapshot.storage.k8s.io_volumesnapshotclasses.yaml",
		"config/crd/snapshot.storage.k8s.io_volumesnapshotcontents.yaml",
		"config/crd/snapshot.storage.k8s.io_volumesnapshots.yaml",
	}
}

// establishTimeout bounds the wait for the API server to serve a freshly created CRD.
const establishTimeout = time.Minute

// InstallSnapshotCRDs creates (or updates) the VolumeSnapshotClass, VolumeSnapshotContent and VolumeSnapshot
// CRDs from the snapshot client module and waits until the API server reports each one Established. The
// manifests are read from the Go module cache at run time rather than copied into the repository.
func (c *Cluster) InstallSnapshotCRDs(ctx context.Context) error {
	dir, err := snapshotModuleDir(ctx)
	if err != nil {
		return err
	}
	client, err := apiextensions.NewForConfig(c.RESTConfig())
	if err != nil {
		return fmt.Errorf("apiextensions client: %w", err)
	}
	var names []string
	for _, rel := range snapshotCRDFiles() {
		crd, err := readCRD(filepath.Join(dir, rel))
		if err != nil {
			return err
		}
		if err := createOrUpdateCRD(ctx, client, crd); err != nil {
			return err
		}
		names = append(names, crd.Name)
	}
	for _, name := range names {
		if err := waitEstablished(ctx, client, name); err != nil {
			return err
		}
	}
	klog.FromContext(ctx).Info("Snapshot CRDs established", "crds", names, "from", dir)
	return nil
}

// snapshotModuleDir finds SnapshotClientModule's directory by asking the go command in the e2e module,
// downloading the module if the cache does not hold it yet.
func snapshotModuleDir(ctx context.Context) (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("working directory: %w", err)
	}
	root, err := RepoRoot(wd)
	if err != nil {
		return "", err
	}
	e2eDir := filepath.Join(root, "e2e")
	var mod struct{ Version, Dir string }
	if err := goJSON(ctx, e2eDir, &mod, "list", "-m", "-json", SnapshotClientModule); err != nil {
		return "", err
	}
	if mod.Dir == "" {
		if mod.Version == "" {
			return "", fmt.Errorf("%s is not in the e2e module's build list", SnapshotClientModule)
		}
		if err := goJSON(ctx, e2eDir, &mod, "mod", "download", "-json", SnapshotClientModule+"@"+mod.Version); err != nil {
			return "", err
		}
		if mod.Dir == "" {
			return "", fmt.Errorf("go mod download %s@%s reported no directory", SnapshotClientModule, mod.Version)
		}
	}
	return mod.Dir, nil
}

// goJSON runs the go command in dir and decodes its JSON output into out.
func goJSON(ctx context.Context, dir string, out any, args ...string) error {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	var stderr strings.Builder
	cmd.Stderr = &stderr
	data, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("go %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("go %s: decode output: %w", strings.Join(args, " "), err)
	}
	return nil
}

func readCRD(path string) (*apiextensionsv1.CustomResourceDefinition, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read CRD: %w", err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(data, crd); err != nil {
		return nil, fmt.Errorf("decode CRD %s: %w", path, err)
	}
	if crd.Kind != "CustomResourceDefinition" || crd.Name == "" {
		return nil, fmt.Errorf("%s: not a named CustomResourceDefinition (kind %q)", path, crd.Kind)
	}
	return crd, nil
}

// createOrUpdateCRD creates crd, or replaces the spec of one that exists (a cluster kept with --keep, or a
// second call), so the call is idempotent.
func createOrUpdateCRD(ctx context.Context, client apiextensions.Interface, crd *apiextensionsv1.CustomResourceDefinition) error {
	crds := client.ApiextensionsV1().CustomResourceDefinitions()
	_, err := crds.Create(ctx, crd, metav1.CreateOptions{})
	if err == nil {
		return nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create CRD %s: %w", crd.Name, err)
	}
	current, err := crds.Get(ctx, crd.Name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("get CRD %s: %w", crd.Name, err)
	}
	current.Spec = crd.Spec
	current.Annotations = crd.Annotations
	if _, err := crds.Update(ctx, current, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("update CRD %s: %w", crd.Name, err)
	}
	return nil
}

func waitEstablished(ctx context.Context, client apiextensions.Interface, name string) error {
	ctx, cancel := context.WithTimeout(ctx, establishTimeout)
	defer cancel()
	var last *apiextensionsv1.CustomResourceDefinition
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		crd, err := client.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil // transient: retried until the timeout, which reports it
		}
		last = crd
		for _, cond := range crd.Status.Conditions {
			if cond.Type == apiextensionsv1.NamesAccepted && cond.Status == apiextensionsv1.ConditionFalse {
				return false, fmt.Errorf("CRD %s: names not accepted: %s", name, cond.Message)
			}
			if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		var conds []apiextensionsv1.CustomResourceDefinitionCondition
		if last != nil {
			conds = last.Status.Conditions
		}
		return fmt.Errorf("wait for CRD %s to be Established: %w (conditions %+v)", name, err, conds)
	}
	return nil
}
