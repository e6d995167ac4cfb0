//go:build e2e

package kubeletsim_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/stowage-csi/stowage/e2e/cluster/clustertest"
	"github.com/stowage-csi/stowage/e2e/kubeletsim"
	"github.com/stowage-csi/stowage/e2e/rig"
)

const (
	testImage = "stowage.test/testcontainer:e2e"
	// graceCap is the node's MaxGracePeriod: far below the Pods' 600 s, as in the rig.
	graceCap = 3 * time.Second
)

// TestE2EKubeletSimContainers runs Pods whose image the node knows as sandboxed processes, against a real
// control plane: user, groups, environment, root and a Memory emptyDir; restarts under OnFailure; SIGKILL
// of a container that ignores SIGTERM once the grace cap has passed; and Stop, which leaves no mount and
// no process.
func TestE2EKubeletSimContainers(t *testing.T) {
	n := startRunNode(t)
	t.Run("sandboxed container with a Memory emptyDir", n.checkSandbox)
	t.Run("failing container restarts under OnFailure", n.checkRestart)
	t.Run("deletion kills a container ignoring SIGTERM after the grace cap", n.checkKillAfterGrace)
	t.Run("stop kills containers and unmounts emptyDirs", n.checkStopKills)
}

// runNode is a simulated node that runs testImage.
type runNode struct {
	ctx  context.Context
	kube kubernetes.Interface
	node *kubeletsim.Node
	root string
}

func startRunNode(t *testing.T) *runNode {
	bin := filepath.Join(t.TempDir(), "testcontainer")
	build := exec.Command("go", "build", "-trimpath", "-o", bin, "./internal/testcontainer")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build testcontainer: %v\n%s", err, out)
	}
	c := clustertest.Start(t)
	n := &runNode{ctx: context.Background(), kube: c.Client(), root: t.TempDir()}
	var err error
	n.node, err = kubeletsim.Start(n.ctx, kubeletsim.Config{
		Client: n.kube, NodeName: nodeName, PluginSocket: startFakePlugin(t).socket, RootDir: n.root,
		Images:         map[string]kubeletsim.Image{testImage: {Files: map[string]string{"/bin/testcontainer": bin}}},
		MaxGracePeriod: graceCap, RestartBackoff: 200 * time.Millisecond, MaxRestartBackoff: time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := n.node.Stop(); err != nil {
			t.Errorf("stop node: %v", err)
		}
		if left := mounts(t, n.root); len(left) > 0 {
			t.Errorf("mounts left after Stop: %v", left)
		}
		if left := processesWith(t, "--marker=kubeletsim-e2e-"); len(left) > 0 {
			t.Errorf("container processes left after Stop: %v", left)
		}
	})
	return n
}

// runPod is a Pod shaped like a Mountpoint Pod (user 1000, no privileges, a 10Mi Memory emptyDir at /comm,
// a grace period of 600 s) running testcontainer with steps.
func runPod(name string, policy v1.RestartPolicy, fsGroup int64, steps ...string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: v1.PodSpec{
			NodeName: nodeName, RestartPolicy: policy, TerminationGracePeriodSeconds: ptr(int64(600)),
			SecurityContext: &v1.PodSecurityContext{FSGroup: &fsGroup},
			Containers: []v1.Container{{
				Name: "c", Image: testImage, Command: []string{"/bin/testcontainer"},
				Args: append(steps, "--marker=kubeletsim-e2e-"+name),
				Env:  []v1.EnvVar{{Name: "FOO", Value: "bar"}},
				SecurityContext: &v1.SecurityContext{
					RunAsUser: ptr(int64(1000)), RunAsNonRoot: ptr(true), AllowPrivilegeEscalation: ptr(false),
					Capabilities: &v1.Capabilities{Drop: []v1.Capability{"ALL"}},
				},
				VolumeMounts: []v1.VolumeMount{{Name: "comm", MountPath: "/comm"}, {Name: "data", MountPath: "/data"}},
			}},
			Volumes: []v1.Volume{
				{Name: "comm", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{
					Medium: v1.StorageMediumMemory, SizeLimit: ptr(resource.MustParse("10Mi"))}}},
				{Name: "data", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
			},
		},
	}
}

func (n *runNode) create(t *testing.T, pod *v1.Pod) *v1.Pod {
	t.Helper()
	got, err := n.kube.CoreV1().Pods(pod.Namespace).Create(n.ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// waitPod waits until the Pod's status satisfies cond and returns it.
func (n *runNode) waitPod(t *testing.T, name, what string, cond func(*v1.Pod) bool) *v1.Pod {
	t.Helper()
	var pod *v1.Pod
	rig.Eventually(t, n.ctx, time.Minute, "pod "+name+" "+what, func(ctx context.Context) (bool, error) {
		var err error
		pod, err = n.kube.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		return err == nil && cond(pod), err
	})
	return pod
}

func running(p *v1.Pod) bool {
	if p.Status.Phase != v1.PodRunning || len(p.Status.ContainerStatuses) != 1 {
		return false
	}
	s := p.Status.ContainerStatuses[0]
	return s.State.Running != nil && s.Ready && s.Started != nil && *s.Started
}

// waitLog waits until the container's log holds want.
func (n *runNode) waitLog(t *testing.T, pod *v1.Pod, want string) string {
	t.Helper()
	var log []byte
	rig.Eventually(t, n.ctx, time.Minute, fmt.Sprintf("%q in the log of %s", want, pod.Name), func(context.Context) (bool, error) {
		var err error
		log, err = n.node.ContainerLog(string(pod.UID), "c")
		return strings.Contains(string(log), want), err
	})
	return string(log)
}

func (n *runNode) deleteAndWait(t *testing.T, name string) time.Duration {
	t.Helper()
	start := time.Now()
	if err := n.kube.CoreV1().Pods("default").Delete(n.ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	rig.Eventually(t, n.ctx, time.Minute, "pod "+name+" gone", func(ctx context.Context) (bool, error) {
		_, err := n.kube.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	return time.Since(start)
}

func (n *runNode) checkSandbox(t *testing.T) {
	pod := n.create(t, runPod("sandbox", v1.RestartPolicyOnFailure, 3000,
		"id", "env", "stat:"+n.root, "stat:/work", "stat:/comm", "write:/comm/hello=hi", "waitfile:/comm/go", "exit:0"))
	n.waitPod(t, "sandbox", "Running, container started and ready", running)

	comm := n.node.EmptyDirPath(string(pod.UID), "comm")
	if want := filepath.Join(n.root, "pods", string(pod.UID), "volumes", "kubernetes.io~empty-dir", "comm"); comm != want {
		t.Errorf("EmptyDirPath = %s, want the kubelet's %s", comm, want)
	}
	if !slices.Contains(mounts(t, comm), comm) {
		t.Errorf("emptyDir comm is not a mount at %s", comm)
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(comm, &st); err != nil || st.Type != 0x01021994 || st.Blocks*uint64(st.Bsize) != 10<<20 {
		t.Errorf("emptyDir comm: statfs type %#x, %d bytes (%v); want a 10Mi tmpfs", st.Type, st.Blocks*uint64(st.Bsize), err)
	}
	var hello os.FileInfo
	rig.Eventually(t, n.ctx, time.Minute, "comm/hello on the host", func(context.Context) (bool, error) {
		var err error
		hello, err = os.Stat(filepath.Join(comm, "hello"))
		return err == nil, err
	})
	if sys := hello.Sys().(*syscall.Stat_t); sys.Uid != 1000 || sys.Gid != 3000 {
		t.Errorf("comm/hello owned by %d:%d, want 1000:3000 (the user and the fsGroup)", sys.Uid, sys.Gid)
	}
	if fi, err := os.Stat(comm); err != nil || fi.Sys().(*syscall.Stat_t).Gid != 3000 || fi.Mode()&os.ModeSetgid == 0 {
		t.Errorf("emptyDir comm: %v, %v; want group 3000 with the setgid bit", fi.Mode(), err)
	}
	if err := os.WriteFile(filepath.Join(comm, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	done := n.waitPod(t, "sandbox", "Succeeded", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodSucceeded })
	if s := done.Status.ContainerStatuses; len(s) != 1 || s[0].State.Terminated == nil || s[0].State.Terminated.ExitCode != 0 ||
		s[0].State.Terminated.Reason != "Completed" || s[0].RestartCount != 0 {
		t.Errorf("container status of a Pod that exited 0: %+v", s)
	}

	log := n.waitLog(t, pod, "exists /comm")
	for _, want := range []string{"uid=1000 gid=1000 groups=[3000]\n", "absent " + n.root + "\n", "absent /work\n"} {
		if !strings.Contains(log, want) {
			t.Errorf("container log lacks %q:\n%s", want, log)
		}
	}
	var env []string
	for _, l := range strings.Split(log, "\n") {
		if e, ok := strings.CutPrefix(l, "env "); ok {
			env = append(env, e)
		}
	}
	if want := []string{"FOO=bar", "HOSTNAME=sandbox", "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}; !slices.Equal(env, want) {
		t.Errorf("container environment = %q, want %q", env, want)
	}
	podDir := filepath.Join(n.root, "pods", string(pod.UID))
	rig.Eventually(t, n.ctx, time.Minute, "the Succeeded Pod's directory removed", func(context.Context) (bool, error) {
		_, err := os.Stat(podDir)
		return os.IsNotExist(err), nil
	})
	n.deleteAndWait(t, "sandbox")
}

func (n *runNode) checkRestart(t *testing.T) {
	pod := n.create(t, runPod("restart", v1.RestartPolicyOnFailure, 1000, "count:/data/runs:3"))
	done := n.waitPod(t, "restart", "Succeeded", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodSucceeded })
	s := done.Status.ContainerStatuses
	if len(s) != 1 || s[0].RestartCount != 2 || s[0].State.Terminated == nil || s[0].State.Terminated.ExitCode != 0 ||
		s[0].LastTerminationState.Terminated == nil || s[0].LastTerminationState.Terminated.ExitCode != 1 {
		t.Errorf("container status after two failures and a success: %+v", s)
	}
	log := n.waitLog(t, pod, "run 3 of 3")
	if !strings.Contains(log, "run 1 of 3\n") || !strings.Contains(log, "run 2 of 3\n") {
		t.Errorf("container log does not show three runs:\n%s", log)
	}
	n.deleteAndWait(t, "restart")
}

func (n *runNode) checkKillAfterGrace(t *testing.T) {
	pod := n.create(t, runPod("stubborn", v1.RestartPolicyOnFailure, 1000, "ignore-term", "sleep"))
	n.waitPod(t, "stubborn", "Running, container started and ready", running)
	n.waitLog(t, pod, "sleeping")
	if len(processesWith(t, "--marker=kubeletsim-e2e-stubborn")) != 1 {
		t.Fatal("the container's process is not visible on the host")
	}
	took := n.deleteAndWait(t, "stubborn")
	if took < graceCap {
		t.Errorf("pod gone %s after deletion, before the grace cap of %s", took, graceCap)
	}
	if log, err := n.node.ContainerLog(string(pod.UID), "c"); err != nil || !strings.Contains(string(log), "SIGTERM received, ignored") {
		t.Errorf("the container was not sent SIGTERM: %v\n%s", err, log)
	}
	if left := processesWith(t, "--marker=kubeletsim-e2e-stubborn"); len(left) > 0 {
		t.Errorf("processes left of the deleted Pod: %v", left)
	}
}

func (n *runNode) checkStopKills(t *testing.T) {
	pod := n.create(t, runPod("sleeper", v1.RestartPolicyAlways, 1000, "sleep"))
	n.waitPod(t, "sleeper", "Running, container started and ready", running)
	n.waitLog(t, pod, "sleeping")
	if len(mounts(t, n.root)) == 0 {
		t.Fatal("no mounts under the root while sleeper runs")
	}
	if err := n.node.Stop(); err != nil {
		t.Fatal(err)
	}
	if left := mounts(t, n.root); len(left) > 0 {
		t.Errorf("mounts left after Stop: %v", left)
	}
	if left := processesWith(t, "--marker=kubeletsim-e2e-"); len(left) > 0 {
		t.Errorf("container processes left after Stop: %v", left)
	}
}

// processesWith lists the host processes whose command line holds s.
func processesWith(t *testing.T, s string) []string {
	t.Helper()
	out, err := rig.ProcessesWith(s)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
