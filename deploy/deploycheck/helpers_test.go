package deploycheck

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// upstreamImages are upstream's images for each slot Stowage fills (the tags upstream's own manifests
// deploy): what a user swaps in, one container at a time.
var upstreamImages = map[string]string{
	"csi-attacher":              "registry.k8s.io/sig-storage/csi-attacher:v4.12.0",
	"csi-provisioner":           "registry.k8s.io/sig-storage/csi-provisioner:v6.3.0",
	"csi-resizer":               "registry.k8s.io/sig-storage/csi-resizer:v2.2.1",
	"csi-snapshotter":           "registry.k8s.io/sig-storage/csi-snapshotter:v8.6.0",
	"snapshot-controller":       "registry.k8s.io/sig-storage/snapshot-controller:v8.6.0",
	"ebs-plugin":                "public.ecr.aws/ebs-csi-driver/aws-ebs-csi-driver:v1.64.0",
	"s3-controller":             "public.ecr.aws/mountpoint-s3-csi-driver/aws-mountpoint-s3-csi-driver:v2.7.0",
	"s3-node":                   "public.ecr.aws/mountpoint-s3-csi-driver/aws-mountpoint-s3-csi-driver:v2.7.0",
	"csi-node-driver-registrar": "registry.k8s.io/sig-storage/csi-node-driver-registrar:v2.17.0",
	"livenessprobe":             "registry.k8s.io/sig-storage/livenessprobe:v2.19.0",
}

// rbacFiles names, per container, the deploy/rbac file holding the RBAC its binary needs.
var rbacFiles = map[string]string{
	"csi-attacher":        "csi-attacher.yaml",
	"csi-provisioner":     "csi-provisioner.yaml",
	"csi-resizer":         "csi-resizer.yaml",
	"csi-snapshotter":     "csi-snapshotter.yaml",
	"snapshot-controller": "snapshot-controller.yaml",
	"ebs-plugin":          "ebs-plugin.yaml",
	"s3-csi-controller":   "s3-controller.yaml",
	"s3-plugin":           "s3-node.yaml",
}

// stowageImage returns the image (images.tsv name) a container runs when it is one of Stowage's: an image
// whose repository ends in /<name> and whose name is in images.tsv.
func stowageImage(t *testing.T, image string) (string, bool) {
	repo, _, _ := strings.Cut(image, ":")
	name := repo[strings.LastIndex(repo, "/")+1:]
	if !strings.Contains(repo, "stowage") {
		return "", false
	}
	for _, img := range readImages(t) {
		if img.name == name {
			return name, true
		}
	}
	t.Errorf("image %s looks like Stowage's, but %s is not in deploy/images/images.tsv", image, name)
	return "", false
}

// checkObjects runs every check on one rendered set of objects.
func checkObjects(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	if len(objs) == 0 {
		t.Fatal("rendered nothing")
	}
	seen := map[string]bool{}
	for _, o := range objs {
		id := o.GetAPIVersion() + "/" + o.GetKind() + "/" + o.GetNamespace() + "/" + o.GetName()
		if seen[id] {
			t.Errorf("%s rendered twice", id)
		}
		seen[id] = true
	}
	pods, err := Pods(objs)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		for _, err := range CheckPod(p) {
			t.Error(err)
		}
	}
	checkRBAC(t, objs, pods)
	checkImagePaths(t, pods)
	checkServices(t, objs)
}

// checkRBAC: every pod's ServiceAccount is rendered and is one deploy/rbac defines, and it is granted every
// rule deploy/rbac grants the binary of each of its containers.
func checkRBAC(t *testing.T, objs []*unstructured.Unstructured, pods []Pod) {
	t.Helper()
	got, err := RolesOf(objs)
	if err != nil {
		t.Fatal(err)
	}
	all := rbacObjects(t, "*.yaml")
	allRoles, err := RolesOf(all)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		ns := namespaceOf(p.Name)
		sa := ns + "/" + p.Spec.ServiceAccountName
		if !got.ServiceAccounts[sa] {
			t.Errorf("%s runs as ServiceAccount %s, which is not rendered", p.Name, sa)
		}
		if !allRoles.ServiceAccounts[sa] {
			t.Errorf("%s runs as ServiceAccount %s, which deploy/rbac does not define", p.Name, sa)
		}
		granted := got.RulesOf(sa)
		for _, c := range p.Spec.Containers {
			file, ok := rbacFiles[c.Name]
			if !ok {
				continue
			}
			want, err := RolesOf(rbacObjects(t, file))
			if err != nil {
				t.Fatal(err)
			}
			// The binary's ServiceAccount in its file: the pod's, when the file defines it (a driver's own
			// pods), else the file's only one (a sidecar, whose roles the pod's ServiceAccount must hold).
			from := sa
			if !want.ServiceAccounts[sa] {
				if len(want.ServiceAccounts) != 1 {
					t.Fatalf("deploy/rbac/%s defines %d ServiceAccounts and not %s", file, len(want.ServiceAccounts), sa)
				}
				for s := range want.ServiceAccounts {
					from = s
				}
			}
			for _, rule := range want.RulesOf(from) {
				if !slices.Contains(granted, rule) {
					t.Errorf("%s: container %s needs %q (deploy/rbac/%s), not granted to %s", p.Name, c.Name, rule, file, sa)
				}
			}
		}
	}
}

// checkImagePaths: a path a container execs in one of Stowage's images (command, preStop hook) is in it.
func checkImagePaths(t *testing.T, pods []Pod) {
	t.Helper()
	d := parseImagesDockerfile(t)
	for _, p := range pods {
		for _, c := range p.Spec.Containers {
			img, ok := stowageImage(t, c.Image)
			if !ok {
				continue
			}
			files := d.Files(img)
			var execs []string
			if len(c.Command) > 0 {
				execs = append(execs, c.Command[0])
			}
			if c.Lifecycle != nil && c.Lifecycle.PreStop != nil && c.Lifecycle.PreStop.Exec != nil {
				execs = append(execs, c.Lifecycle.PreStop.Exec.Command[0])
			}
			for _, e := range execs {
				if files[e] == "" {
					t.Errorf("%s: container %s execs %s, which image %s does not hold", p.Name, c.Name, e, img)
				}
			}
			for _, env := range c.Env {
				if env.Name == "MOUNTPOINT_IMAGE" {
					if mp, ok := stowageImage(t, env.Value); ok && mp != "s3-mounter" {
						t.Errorf("%s: MOUNTPOINT_IMAGE is %s; Stowage's Mountpoint Pod image is s3-mounter", p.Name, env.Value)
					}
				}
			}
		}
	}
}

func namespaceOf(podName string) string { return strings.Split(podName, "/")[1] }

func rbacObjects(t *testing.T, glob string) []*unstructured.Unstructured {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(repoRoot, "deploy/rbac", glob))
	if err != nil || len(files) == 0 {
		t.Fatalf("deploy/rbac/%s: %v", glob, err)
	}
	var objs []*unstructured.Unstructured
	for _, f := range files {
		o, err := ParseFile(f)
		if err != nil {
			t.Fatal(err)
		}
		objs = append(objs, o...)
	}
	return objs
}

// images returns the image of every container, by workload and container.
func images(t *testing.T, objs []*unstructured.Unstructured) map[string]string {
	t.Helper()
	pods, err := Pods(objs)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, p := range pods {
		for _, c := range p.Spec.Containers {
			out[p.Name+"/"+c.Name] = c.Image
		}
	}
	return out
}
