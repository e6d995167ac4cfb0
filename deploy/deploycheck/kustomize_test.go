package deploycheck

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/api/types"
)

// kustomizeCopies maps each file under deploy/kustomize (or, as ../helm/..., in a chart) that is a copy to its
// source under deploy/: kustomize reads files only from inside a kustomization's folder, so the bases carry
// copies of deploy/'s RBAC, CRDs and CSIDrivers.
var kustomizeCopies = map[string]string{
	"ebs/rbac-ebs-plugin.yaml":                          "rbac/ebs-plugin.yaml",
	"ebs/csidriver.yaml":                                "csidriver/ebs.csi.aws.com.yaml",
	"s3/rbac-s3-controller.yaml":                        "rbac/s3-controller.yaml",
	"s3/rbac-s3-node.yaml":                              "rbac/s3-node.yaml",
	"s3/csidriver.yaml":                                 "csidriver/s3.csi.aws.com.yaml",
	"s3/crd-mountpoints3podattachments.yaml":            "crds/s3.csi.aws.com_mountpoints3podattachments.yaml",
	"snapshot-controller/rbac-snapshot-controller.yaml": "rbac/snapshot-controller.yaml",
	"components/csi-attacher/rbac.yaml":                 "rbac/csi-attacher.yaml",
	"components/csi-provisioner/rbac.yaml":              "rbac/csi-provisioner.yaml",
	"components/csi-resizer/rbac.yaml":                  "rbac/csi-resizer.yaml",
	"components/csi-snapshotter/rbac.yaml":              "rbac/csi-snapshotter.yaml",
}

func init() {
	for _, crd := range []string{
		"snapshot.storage.k8s.io_volumesnapshotclasses", "snapshot.storage.k8s.io_volumesnapshotcontents",
		"snapshot.storage.k8s.io_volumesnapshots", "groupsnapshot.storage.k8s.io_volumegroupsnapshotclasses",
		"groupsnapshot.storage.k8s.io_volumegroupsnapshotcontents", "groupsnapshot.storage.k8s.io_volumegroupsnapshots",
	} {
		kustomizeCopies["snapshot-controller/crd-"+crd+".yaml"] = "crds/" + crd + ".yaml"
	}
	// Helm reads files only from inside the chart: its RBAC, CSIDriver and CRD are copies too.
	for dst, src := range map[string]string{
		"stowage-ebs/files/csidriver.yaml":                               "csidriver/ebs.csi.aws.com.yaml",
		"stowage-s3/files/csidriver.yaml":                                "csidriver/s3.csi.aws.com.yaml",
		"stowage-s3/files/rbac/s3-controller.yaml":                       "rbac/s3-controller.yaml",
		"stowage-s3/files/rbac/s3-node.yaml":                             "rbac/s3-node.yaml",
		"stowage-s3/crds/s3.csi.aws.com_mountpoints3podattachments.yaml": "crds/s3.csi.aws.com_mountpoints3podattachments.yaml",
	} {
		kustomizeCopies["../helm/"+dst] = src
	}
	for _, f := range []string{"csi-attacher", "csi-provisioner", "csi-resizer", "csi-snapshotter", "ebs-plugin"} {
		kustomizeCopies["../helm/stowage-ebs/files/rbac/"+f+".yaml"] = "rbac/" + f + ".yaml"
	}
	kustomizeCopies["components/s3-dynamic-provisioning/rbac.yaml"] = "rbac/csi-provisioner.yaml"
	kustomizeCopies["../helm/stowage-s3/files/rbac/csi-provisioner.yaml"] = "rbac/csi-provisioner.yaml"
}

// TestCopiesMatchDeploy: a copy that drifted from its source would install other RBAC (or CRDs) than the e2e
// tests prove. Run with DEPLOYCHECK_UPDATE=1 to copy the sources again.
func TestCopiesMatchDeploy(t *testing.T) {
	for dst, src := range kustomizeCopies {
		want, err := os.ReadFile(filepath.Join(repoRoot, "deploy", src))
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(repoRoot, "deploy/kustomize", dst)
		if os.Getenv("DEPLOYCHECK_UPDATE") == "1" {
			if err := os.WriteFile(path, want, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("deploy/kustomize/%s differs from deploy/%s (DEPLOYCHECK_UPDATE=1 go test -run TestCopiesMatchDeploy copies it again)", dst, src)
		}
	}
}

func kustomizeDir(name string) string {
	abs, err := filepath.Abs(filepath.Join(repoRoot, "deploy/kustomize", name))
	if err != nil {
		panic(err)
	}
	return abs
}

// sidecarComponents are the components that compose the EBS controller pod.
var sidecarComponents = []string{"csi-attacher", "csi-provisioner", "csi-resizer", "csi-snapshotter", "liveness-probe"}

// TestKustomizeEBSCompositions renders the EBS base with every subset of the components, as a user's
// kustomization.yaml would compose it, and each of those with each of Stowage's images swapped for
// upstream's; checks every result, and that a swap changes that one image and nothing else.
func TestKustomizeEBSCompositions(t *testing.T) {
	for mask := range 1 << len(sidecarComponents) {
		var chosen []string
		for i, c := range sidecarComponents {
			if mask&(1<<i) != 0 {
				chosen = append(chosen, c)
			}
		}
		name := "ebs+" + strings.Join(chosen, "+")
		t.Run(name, func(t *testing.T) {
			k := Kustomization{Resources: []string{kustomizeDir("ebs")}}
			for _, c := range chosen {
				k.Components = append(k.Components, kustomizeDir("components/"+c))
			}
			objs := renderKustomization(t, k)
			checkObjects(t, objs)
			pods, err := Pods(objs)
			if err != nil {
				t.Fatal(err)
			}
			controller := containerNames(pods, "Deployment/kube-system/ebs-csi-controller")
			for _, c := range chosen {
				if !strings.Contains(controller, ","+c+",") {
					t.Errorf("component %s: no %s container in the controller pod (%s)", c, c, controller)
				}
			}
			checkSwaps(t, k, objs)
		})
	}
}

// TestKustomizeBases renders the other bases and every example, with the same checks and swaps.
func TestKustomizeBases(t *testing.T) {
	compositions := map[string]Kustomization{
		"s3":                  {Resources: []string{kustomizeDir("s3")}},
		"snapshot-controller": {Resources: []string{kustomizeDir("snapshot-controller")}},
		"s3+s3-dynamic-provisioning": {Resources: []string{kustomizeDir("s3")},
			Components: []string{kustomizeDir("components/s3-dynamic-provisioning")}},
		"s3+s3-metrics+s3-service-monitor+s3-dynamic-provisioning": {Resources: []string{kustomizeDir("s3")},
			Components: []string{kustomizeDir("components/s3-metrics"), kustomizeDir("components/s3-service-monitor"),
				kustomizeDir("components/s3-dynamic-provisioning")}},
	}
	for name, k := range compositions {
		t.Run(name, func(t *testing.T) {
			objs := renderKustomization(t, k)
			checkObjects(t, objs)
			checkSwaps(t, k, objs)
		})
	}
	examples, err := filepath.Glob(filepath.Join(repoRoot, "deploy/kustomize/examples/*/kustomization.yaml"))
	if err != nil || len(examples) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	for _, e := range examples {
		dir := filepath.Dir(e)
		t.Run("examples/"+filepath.Base(dir), func(t *testing.T) {
			objs, err := RenderKustomizeDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			checkObjects(t, objs)
		})
	}
}

// TestKustomizeS3HoldsDeployS3: the S3 base installs every object of deploy/s3 (the namespace and priority
// class of the Mountpoint Pods), as written there.
func TestKustomizeS3HoldsDeployS3(t *testing.T) {
	objs := renderKustomization(t, Kustomization{Resources: []string{kustomizeDir("s3")}})
	want, err := ParseFile(filepath.Join(repoRoot, "deploy/s3/mount-s3.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range want {
		if got := find(objs, w.GetKind(), w.GetNamespace(), w.GetName()); got == nil {
			t.Errorf("%s %s is not in the s3 base", w.GetKind(), w.GetName())
		} else if !reflect.DeepEqual(got.Object, w.Object) {
			t.Errorf("%s %s differs from deploy/s3/mount-s3.yaml:\n got %v\nwant %v", w.GetKind(), w.GetName(), got.Object, w.Object)
		}
	}
}

func renderKustomization(t *testing.T, k Kustomization) []*unstructured.Unstructured {
	t.Helper()
	objs, err := RenderKustomization(t.TempDir(), k)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// checkSwaps renders k again with each of Stowage's images in objs replaced by upstream's, one at a time.
func checkSwaps(t *testing.T, k Kustomization, objs []*unstructured.Unstructured) {
	t.Helper()
	before := images(t, objs)
	swapped := map[string]bool{}
	for _, image := range before {
		name, ok := stowageImage(t, image)
		if !ok || swapped[name] {
			continue
		}
		swapped[name] = true
		up, ok := upstreamImages[name]
		if !ok {
			continue // s3-mounter has no upstream image of its own
		}
		repo, tag, _ := strings.Cut(up, ":")
		k2 := k
		k2.Images = []types.Image{{Name: "stowage/" + name, NewName: repo, NewTag: tag}}
		t.Run("upstream-"+name, func(t *testing.T) {
			objs2 := renderKustomization(t, k2)
			checkObjects(t, objs2)
			after := images(t, objs2)
			for c, img := range before {
				want := img
				if n, ok := stowageImage(t, img); ok && n == name {
					want = up
				}
				if after[c] != want {
					t.Errorf("%s: image %s after swapping %s, want %s", c, after[c], name, want)
				}
			}
			if len(objs2) != len(objs) {
				t.Errorf("swapping %s rendered %d objects instead of %d", name, len(objs2), len(objs))
			}
		})
	}
}

func containerNames(pods []Pod, workload string) string {
	names := ","
	for _, p := range pods {
		if p.Name == workload {
			for _, c := range p.Spec.Containers {
				names += c.Name + ","
			}
		}
	}
	return names
}

func find(objs []*unstructured.Unstructured, kind, namespace, name string) *unstructured.Unstructured {
	for _, o := range objs {
		if o.GetKind() == kind && o.GetNamespace() == namespace && o.GetName() == name {
			return o
		}
	}
	return nil
}

// TestKustomizeS3DynamicProvisioning: the component runs csi-provisioner on the socket s3-controller serves
// with --csi-endpoint (CheckPod follows both), and its RBAC has names of its own, so an EBS composition with
// the csi-provisioner component and the S3 one with this component install into one cluster without an
// object of one replacing a different object of the other.
func TestKustomizeS3DynamicProvisioning(t *testing.T) {
	s3 := renderKustomization(t, Kustomization{Resources: []string{kustomizeDir("s3")},
		Components: []string{kustomizeDir("components/s3-dynamic-provisioning")}})
	pods, err := Pods(s3)
	if err != nil {
		t.Fatal(err)
	}
	if names := containerNames(pods, "Deployment/kube-system/s3-csi-controller"); names != ",s3-csi-controller,csi-provisioner," {
		t.Errorf("s3-csi-controller runs %s", names)
	}
	for _, p := range pods {
		for _, c := range p.Spec.Containers {
			if c.Name == "s3-csi-controller" {
				if ep, _ := Flag(c, "csi-endpoint"); ep != "unix:///csi/csi.sock" {
					t.Errorf("s3-csi-controller: --csi-endpoint=%q", ep)
				}
			}
		}
	}
	k := Kustomization{Resources: []string{kustomizeDir("ebs")}}
	for _, c := range sidecarComponents {
		k.Components = append(k.Components, kustomizeDir("components/"+c))
	}
	ebs := renderKustomization(t, k)
	for _, o := range s3 {
		other := find(ebs, o.GetKind(), o.GetNamespace(), o.GetName())
		if other != nil && !reflect.DeepEqual(other.Object, o.Object) {
			t.Errorf("%s %s/%s differs between the EBS and the S3 composition: installing one replaces the other's", o.GetKind(), o.GetNamespace(), o.GetName())
		}
	}
}
