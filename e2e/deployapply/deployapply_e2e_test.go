//go:build e2e

package deployapply

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/stowage-csi/stowage/e2e/cluster/clustertest"
	"github.com/stowage-csi/stowage/e2e/rig"
)

// testNamespace prefixes the namespaces the renders put the drivers in (kube-system in the defaults):
// stowage-deploy-kustomize and stowage-deploy-helm, so that each installation has its own; the S3 base names
// its own (kube-system, mount-s3).
const testNamespace = "stowage-deploy"

const waitTimeout = 2 * time.Minute

// render runs deploy/deploycheck's render command into a temporary folder and returns the files it wrote.
func render(t *testing.T) []string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	root, err := rig.RepoRoot(wd)
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	cmd := exec.Command("go", "run", "./cmd/render", "-root", root, "-out", out, "-namespace", testNamespace)
	cmd.Dir = filepath.Join(root, "deploy/deploycheck")
	cmd.Env = append(os.Environ(), "GOWORK=off")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("render: %v\n%s", err, b)
	}
	files, err := filepath.Glob(filepath.Join(out, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("render wrote nothing: %v", err)
	}
	sort.Strings(files)
	return files
}

// workloads decodes the Deployments and DaemonSets of a rendered file.
func workloads(t *testing.T, file string) (deployments []appsv1.Deployment, daemonSets []appsv1.DaemonSet) {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			break
		}
		switch m["kind"] {
		case "Deployment":
			var d appsv1.Deployment
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, &d); err != nil {
				t.Fatal(err)
			}
			deployments = append(deployments, d)
		case "DaemonSet":
			var d appsv1.DaemonSet
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, &d); err != nil {
				t.Fatal(err)
			}
			daemonSets = append(daemonSets, d)
		}
	}
	return deployments, daemonSets
}

// TestE2EDeployApply applies each rendered installation server-side (the API server validates every object
// against its schema and admission, not a dry run), then waits for kube-controller-manager to act on it: each
// Deployment's Pods are created (admission accepted the pod spec and found its ServiceAccount and priority
// class), each DaemonSet is observed. Nothing runs the Pods: no node is registered.
func TestE2EDeployApply(t *testing.T) {
	files := render(t)
	c := clustertest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".yaml"), func(t *testing.T) {
			if err := c.Apply(ctx, file); err != nil {
				t.Fatal(err)
			}
			deployments, daemonSets := workloads(t, file)
			if len(deployments)+len(daemonSets) == 0 {
				t.Fatal("no workload rendered")
			}
			for _, d := range deployments {
				rig.Eventually(t, ctx, waitTimeout, fmt.Sprintf("Deployment %s/%s creates its Pods", d.Namespace, d.Name), func(ctx context.Context) (bool, error) {
					got, err := c.Client().AppsV1().Deployments(d.Namespace).Get(ctx, d.Name, metav1.GetOptions{})
					if err != nil {
						return false, err
					}
					if got.Status.Replicas != *got.Spec.Replicas {
						return false, fmt.Errorf("%d of %d Pods created; conditions %v", got.Status.Replicas, *got.Spec.Replicas, got.Status.Conditions)
					}
					return true, nil
				})
				pods, err := c.Client().CoreV1().Pods(d.Namespace).List(ctx, metav1.ListOptions{LabelSelector: metav1.FormatLabelSelector(d.Spec.Selector)})
				if err != nil {
					t.Fatal(err)
				}
				for _, p := range pods.Items {
					if p.Spec.ServiceAccountName != d.Spec.Template.Spec.ServiceAccountName || len(p.Spec.Containers) != len(d.Spec.Template.Spec.Containers) {
						t.Errorf("Pod %s: ServiceAccount %s and %d containers, want %s and %d", p.Name, p.Spec.ServiceAccountName,
							len(p.Spec.Containers), d.Spec.Template.Spec.ServiceAccountName, len(d.Spec.Template.Spec.Containers))
					}
				}
			}
			for _, d := range daemonSets {
				rig.Eventually(t, ctx, waitTimeout, fmt.Sprintf("DaemonSet %s/%s observed", d.Namespace, d.Name), func(ctx context.Context) (bool, error) {
					got, err := c.Client().AppsV1().DaemonSets(d.Namespace).Get(ctx, d.Name, metav1.GetOptions{})
					if err != nil {
						return false, err
					}
					return got.Status.ObservedGeneration == got.Generation, nil
				})
			}
		})
	}
}

// binaries maps each Stowage image to the module and command it ships (deploy/images/images.tsv and the
// Dockerfile; deploy/deploycheck checks those agree).
var binaries = map[string][2]string{
	"csi-attacher":              {"attacher", "csi-attacher"},
	"csi-provisioner":           {"provisioner", "csi-provisioner"},
	"csi-resizer":               {"resizer", "csi-resizer"},
	"csi-snapshotter":           {"snapshotter", "csi-snapshotter"},
	"snapshot-controller":       {"snapshotter", "snapshot-controller"},
	"ebs-plugin":                {"ebs-plugin", "ebs-plugin"},
	"s3-controller":             {"s3-controller", "s3-controller"},
	"s3-node":                   {"s3-node", "s3-node"},
	"csi-node-driver-registrar": {"node-sidecars", "csi-node-driver-registrar"},
	"livenessprobe":             {"node-sidecars", "livenessprobe"},
}

// TestE2EDeployFlagsAccepted starts every Stowage binary the renders run with exactly its container's args
// (and literal env, for $(VAR) and env-backed flags) and STOWAGE_VALIDATE_ONLY=1, with which each binary runs
// every check of its flags, environment and mode that its start runs before it dials or serves, then says
// "configuration valid" and exits 0: a composition that parses but would exit at start-up fails here, not in
// a user's cluster. A container's preStop exec hook (ebs-plugin's pre-stop-hook) is validated the same way,
// with the container's env, which is what the kubelet runs it with.
func TestE2EDeployFlagsAccepted(t *testing.T) {
	files := render(t)
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	root, err := rig.RepoRoot(wd)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	binDir := t.TempDir()
	built := map[string]string{}
	checked := 0
	for _, file := range files {
		for _, p := range podSpecs(t, file) {
			for _, ctr := range slices.Concat(p.spec.InitContainers, p.spec.Containers) {
				repo, _, _ := strings.Cut(ctr.Image, ":")
				image := repo[strings.LastIndex(repo, "/")+1:]
				mb, ok := binaries[image]
				if !ok || !strings.Contains(repo, "stowage") {
					continue // upstream's image: not ours to run
				}
				bin, ok := built[image]
				if !ok {
					if bin, err = rig.BuildCommand(ctx, root, mb[0], mb[1], binDir); err != nil {
						t.Fatal(err)
					}
					built[image] = bin
				}
				where := fmt.Sprintf("%s: %s/%s", filepath.Base(file), p.name, ctr.Name)
				env, args := containerEnvAndArgs(ctr)
				validateOnly(t, ctx, where, bin, mb[1], args, env)
				checked++
				if h := ctr.Lifecycle; h != nil && h.PreStop != nil && h.PreStop.Exec != nil && len(h.PreStop.Exec.Command) > 0 {
					// The hook's command names the image's path of the binary; the kubelet expands no $(VAR) in it.
					validateOnly(t, ctx, where+" preStop", bin, mb[1], h.PreStop.Exec.Command[1:], env)
					checked++
				}
			}
		}
	}
	if checked == 0 {
		t.Fatal("no Stowage container found in the renders")
	}
	t.Logf("%d containers and hooks validated with their manifests' args and env", checked)
}

// pod is a workload's name and pod template.
type pod struct {
	name string
	spec corev1.PodSpec
}

// podSpecs are the pod templates of a rendered file's Deployments and DaemonSets.
func podSpecs(t *testing.T, file string) []pod {
	deployments, daemonSets := workloads(t, file)
	var pods []pod
	for _, d := range deployments {
		pods = append(pods, pod{d.Name, d.Spec.Template.Spec})
	}
	for _, d := range daemonSets {
		pods = append(pods, pod{d.Name, d.Spec.Template.Spec})
	}
	return pods
}

// containerEnvAndArgs are the environment the container's process gets (a value the kubelet resolves from a
// field or a Secret stands in as "from-<name>") and its arguments after the binary, with $(VAR) expanded from
// that environment as the kubelet expands it.
func containerEnvAndArgs(ctr corev1.Container) (env, args []string) {
	args = slices.Clone(ctr.Args)
	if len(ctr.Command) > 1 {
		args = append(slices.Clone(ctr.Command[1:]), args...)
	}
	env = []string{"PATH=" + os.Getenv("PATH")}
	for _, e := range ctr.Env {
		v := e.Value
		if e.ValueFrom != nil {
			v = "from-" + e.Name
		}
		env = append(env, e.Name+"="+v)
		for i := range args {
			args[i] = strings.ReplaceAll(args[i], "$("+e.Name+")", v)
		}
	}
	return env, args
}

// validateOnly runs bin with args and env and STOWAGE_VALIDATE_ONLY=1, and fails t unless the binary exits 0
// with its verdict "<binary>: configuration valid" as all of its stdout.
func validateOnly(t *testing.T, ctx context.Context, where, bin, binary string, args, env []string) {
	t.Helper()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(slices.Clone(env), "STOWAGE_VALIDATE_ONLY=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if want := binary + ": configuration valid\n"; err != nil || stdout.String() != want {
		t.Errorf("%s: %s %q: %v, stdout %q (want %q)\n%s", where, binary, args, err, stdout.String(), want, stderr.String())
	}
}
