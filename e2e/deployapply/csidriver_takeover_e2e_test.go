//go:build e2e

package deployapply

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stowage-csi/stowage/e2e/cluster/clustertest"
	"github.com/stowage-csi/stowage/e2e/rig"
	"github.com/stowage-csi/stowage/e2e/tools"
)

// TestE2EHelmS3TakesOverUpstreamCSIDriver: on a cluster where upstream's aws-mountpoint-s3-csi-driver registered
// s3.csi.aws.com (volumeLifecycleModes Persistent, which the API server keeps immutable), `helm install` of
// stowage-s3 fails before writing anything, naming the field and the command to run, and leaves upstream's
// object as it was; after that command, the same install ends with Stowage's CSIDriver.
func TestE2EHelmS3TakesOverUpstreamCSIDriver(t *testing.T) {
	c := clustertest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	kube := c.Client().StorageV1().CSIDrivers()
	no := false
	yes := true
	upstream := &storagev1.CSIDriver{
		ObjectMeta: metav1.ObjectMeta{Name: "s3.csi.aws.com"},
		Spec: storagev1.CSIDriverSpec{AttachRequired: &no, PodInfoOnMount: &yes, RequiresRepublish: &yes,
			VolumeLifecycleModes: []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecyclePersistent}},
	}
	if _, err := kube.Create(ctx, upstream, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	helm, err := tools.Binary(ctx, tools.Helm(), "helm")
	if err != nil {
		t.Fatal(err)
	}
	root, err := rig.RepoRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	install := func() (string, error) {
		cmd := exec.CommandContext(ctx, helm, "install", "stowage-s3", filepath.Join(root, "deploy/helm/stowage-s3"),
			"--namespace", testNamespace+"-takeover", "--create-namespace", "--kubeconfig", c.Kubeconfig())
		cmd.Env = []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "HELM_CACHE_HOME=" + filepath.Join(home, "cache"),
			"HELM_CONFIG_HOME=" + filepath.Join(home, "config"), "HELM_DATA_HOME=" + filepath.Join(home, "data")}
		out, err := cmd.CombinedOutput()
		return string(out), err
	}

	out, err := install()
	if err == nil {
		t.Fatalf("helm install over upstream's CSIDriver succeeded:\n%s", out)
	}
	for _, want := range []string{"spec.volumeLifecycleModes [Persistent]", "kubectl delete csidriver s3.csi.aws.com"} {
		if !strings.Contains(out, want) {
			t.Errorf("helm's error does not say %q:\n%s", want, out)
		}
	}
	got, err := kube.Get(ctx, upstream.Name, metav1.GetOptions{})
	if err != nil || !slices.Equal(got.Spec.VolumeLifecycleModes, upstream.Spec.VolumeLifecycleModes) {
		t.Fatalf("upstream's CSIDriver after the refused install: %v, %v", got, err)
	}

	// The way out the error names, then the same install.
	if err := kube.Delete(ctx, upstream.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if out, err := install(); err != nil {
		t.Fatalf("helm install after deleting upstream's CSIDriver: %v\n%s", err, out)
	}
	got, err = kube.Get(ctx, upstream.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	modes := slices.Sorted(slices.Values(got.Spec.VolumeLifecycleModes))
	if want := []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecycleEphemeral, storagev1.VolumeLifecyclePersistent}; !slices.Equal(modes, want) ||
		got.Labels["app.kubernetes.io/part-of"] != "stowage" || len(got.Spec.TokenRequests) != 2 {
		t.Errorf("CSIDriver after the install: modes %v, labels %v, token requests %v; want Stowage's", modes, got.Labels, got.Spec.TokenRequests)
	}
}
