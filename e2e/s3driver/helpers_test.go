//go:build e2e

package s3driver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/stowage-csi/stowage/e2e/kubeletsim"
	"github.com/stowage-csi/stowage/e2e/rig"
	"github.com/stowage-csi/stowage/e2e/s3stack"
	"github.com/stowage-csi/stowage/shared/mountproto"
	"github.com/stowage-csi/stowage/shared/s3api"
)

// mountpointPods records, from a watch of the Mountpoint namespace, the last state of every Mountpoint Pod
// the test saw, including the one the Pod had when it was deleted.
type mountpointPods struct {
	mu      sync.Mutex
	last    map[types.UID]*v1.Pod
	deleted map[types.UID]bool
}

// watchMountpointPods starts an informer on the Mountpoint namespace for the rest of the test.
func watchMountpointPods(t *testing.T, s *s3stack.Stack) *mountpointPods {
	t.Helper()
	w := &mountpointPods{last: map[types.UID]*v1.Pod{}, deleted: map[types.UID]bool{}}
	factory := informers.NewSharedInformerFactoryWithOptions(s.Client, 0, informers.WithNamespace(s3api.DefaultMountpointNamespace))
	inf := factory.Core().V1().Pods().Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { w.record(obj, false) },
		UpdateFunc: func(_, obj any) { w.record(obj, false) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			w.record(obj, true)
		},
	}); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	factory.Start(stop)
	t.Cleanup(func() {
		close(stop)
		factory.Shutdown()
	})
	if !cache.WaitForCacheSync(stop, inf.HasSynced) {
		t.Fatal("the Mountpoint Pod informer did not sync")
	}
	return w
}

func (w *mountpointPods) record(obj any, deleted bool) {
	pod, ok := obj.(*v1.Pod)
	if !ok {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.last[pod.UID] = pod
	if deleted {
		w.deleted[pod.UID] = true
	}
}

// checkEndedWithExit0 fails the test unless it saw at least one Mountpoint Pod and every one it saw was
// deleted with the status of a mounter that ended with exit 0: phase Succeeded, container terminated 0.
func (w *mountpointPods) checkEndedWithExit0(t *testing.T) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.last) == 0 {
		t.Error("the test saw no Mountpoint Pod")
	}
	for uid, pod := range w.last {
		if !w.deleted[uid] {
			t.Errorf("Mountpoint Pod %s was not deleted", pod.Name)
			continue
		}
		var exit *v1.ContainerStateTerminated
		for _, cs := range pod.Status.ContainerStatuses {
			if cs.Name == s3api.MountpointContainerName {
				exit = cs.State.Terminated
			}
		}
		if pod.Status.Phase != v1.PodSucceeded || exit == nil || exit.ExitCode != 0 {
			t.Errorf("Mountpoint Pod %s was deleted in phase %s with its container %s, want Succeeded after exit 0",
				pod.Name, pod.Status.Phase, describeTerminated(exit))
		}
	}
}

func describeTerminated(s *v1.ContainerStateTerminated) string {
	if s == nil {
		return "not terminated"
	}
	return fmt.Sprintf("terminated with exit %d (%s)", s.ExitCode, s.Reason)
}

// heldComm keeps a Mountpoint Pod's comm emptyDir (a tmpfs) open. The kubelet unmounts that tmpfs when the
// Pod ends, which would take every file in it along; held open, the tmpfs outlives the unmount, so what is
// still in it afterwards is exactly what s3-node did not remove before the Pod ended.
type heldComm struct {
	pod string
	dir *os.File
}

// holdComm opens the comm dir of Mountpoint Pod mp, checking first that it is the Pod's own tmpfs and that
// s3-node wrote credential files into it.
func holdComm(t *testing.T, s *s3stack.Stack, mp *v1.Pod) *heldComm {
	t.Helper()
	path := s.Nodes[mp.Spec.NodeName].Kubelet.EmptyDirPath(string(mp.UID), s3api.CommVolumeName)
	if mounts, err := kubeletsim.MountsUnder(path); err != nil || !slices.Contains(mounts, path) {
		t.Fatalf("the comm dir %s of Mountpoint Pod %s is not a mount (%v, %v)", path, mp.Name, mounts, err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	h := &heldComm{pod: mp.Name, dir: f}
	if creds := h.credentials(t); len(creds) == 0 {
		t.Fatalf("no credential files in %s of Mountpoint Pod %s", path, mp.Name)
	}
	return h
}

// credentials lists the files in the held comm dir's credentials directory.
func (h *heldComm) credentials(t *testing.T) []string {
	t.Helper()
	entries, err := os.ReadDir(fmt.Sprintf("/proc/self/fd/%d/%s", h.dir.Fd(), mountproto.CredentialsDir))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, len(entries))
	for i, e := range entries {
		names[i] = e.Name()
	}
	return names
}

// mountpointPod gets a Mountpoint Pod by name.
func mountpointPod(t *testing.T, ctx context.Context, s *s3stack.Stack, name string) *v1.Pod {
	t.Helper()
	pod, err := s.Client.CoreV1().Pods(s3api.DefaultMountpointNamespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return pod
}

// waitFailedMount waits for a FailedMount Event on the workload whose message has every one of want, and
// returns the message.
func waitFailedMount(t *testing.T, ctx context.Context, s *s3stack.Stack, pod string, want ...string) string {
	t.Helper()
	var msg string
	rig.Eventually(t, ctx, s3stack.StepTimeout, fmt.Sprintf("a FailedMount Event on Pod %s with %q", pod, want), func(ctx context.Context) (bool, error) {
		l, err := s.Client.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + pod})
		if err != nil {
			return false, err
		}
		for _, e := range l.Items {
			if e.Reason != "FailedMount" {
				continue
			}
			msg = e.Message
			ok := true
			for _, w := range want {
				ok = ok && strings.Contains(e.Message, w)
			}
			if ok {
				return true, nil
			}
		}
		return false, fmt.Errorf("last FailedMount message: %q", msg)
	})
	return msg
}

// checkNothingLeft waits until no Mountpoint Pod and no attachment is left, then fails the test if anything
// is still mounted under the stack's directory.
func checkNothingLeft(t *testing.T, ctx context.Context, s *s3stack.Stack) {
	t.Helper()
	rig.Eventually(t, ctx, s3stack.StepTimeout, "every Mountpoint Pod and attachment gone", func(ctx context.Context) (bool, error) {
		pods, err := s.MountpointPods(ctx)
		return err == nil && len(pods) == 0 && len(attachments(t, ctx, s)) == 0, err
	})
	left, err := kubeletsim.MountsUnder(s.Dir)
	if err != nil || len(left) > 0 {
		t.Fatalf("mounts left after every workload is gone: %v %v", left, err)
	}
}

// deleteWorkloads deletes the workloads and waits for each to be gone.
func deleteWorkloads(t *testing.T, ctx context.Context, s *s3stack.Stack, names ...string) {
	t.Helper()
	for _, n := range names {
		if err := s.Client.CoreV1().Pods("default").Delete(ctx, n, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range names {
		if err := s.DeleteWorkload(ctx, n); err != nil {
			t.Fatalf("%v\n%s", err, events(ctx, s, n))
		}
	}
}

// cleanupWorkloads deletes, at the end of a test that failed half-way, the workloads it may have left, so
// that the stack's Stop finds them unpublished.
func cleanupWorkloads(t *testing.T, s *s3stack.Stack, names ...string) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		for _, n := range names {
			if err := s.DeleteWorkload(ctx, n); err != nil {
				t.Logf("clean up workload %s: %v", n, err)
			}
		}
	})
}

// sharingGroups maps each Mountpoint Pod named in an attachment to the workload UIDs it serves, sorted.
func sharingGroups(t *testing.T, ctx context.Context, s *s3stack.Stack) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, a := range attachments(t, ctx, s) {
		for mp, ws := range a.Spec.MountpointS3PodAttachments {
			for _, w := range ws {
				out[mp] = append(out[mp], w.WorkloadPodUID)
			}
			sort.Strings(out[mp])
		}
	}
	return out
}

// setEndpoint points the PV's Mountpoint at endpoint instead of the stack's S3 server (PV mount options may
// change; Mountpoint Pods started afterwards use the new ones).
func setEndpoint(t *testing.T, ctx context.Context, s *s3stack.Stack, pvName, endpoint string) {
	t.Helper()
	pv, err := s.Client.CoreV1().PersistentVolumes().Get(ctx, pvName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i, o := range pv.Spec.MountOptions {
		if strings.HasPrefix(o, "endpoint-url ") {
			pv.Spec.MountOptions[i] = "endpoint-url " + endpoint
		}
	}
	if _, err := s.Client.CoreV1().PersistentVolumes().Update(ctx, pv, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// gate is a TCP proxy to the S3 server that holds every connection until it is opened: a Mountpoint that
// reaches it has got its FUSE fd from s3-node and is starting up, while s3-node waits for its mount.
type gate struct {
	ln      net.Listener
	target  string
	arrived chan struct{} // closed at the first connection
	open    chan struct{}
	once    sync.Once
	mu      sync.Mutex
	conns   []net.Conn
	wg      sync.WaitGroup
}

// startGate listens on a free port in front of the S3 server at endpoint (http://host:port); t.Cleanup
// closes it and every connection.
func startGate(t *testing.T, endpoint string) *gate {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := &gate{ln: ln, target: strings.TrimPrefix(endpoint, "http://"), arrived: make(chan struct{}), open: make(chan struct{})}
	g.wg.Add(1)
	go g.serve()
	t.Cleanup(g.close)
	return g
}

// URL is the gate's endpoint for Mountpoint's endpoint-url.
func (g *gate) URL() string { return "http://" + g.ln.Addr().String() }

// Open lets held and later connections through.
func (g *gate) Open() { g.once.Do(func() { close(g.open) }) }

func (g *gate) serve() {
	defer g.wg.Done()
	first := sync.OnceFunc(func() { close(g.arrived) })
	for {
		c, err := g.ln.Accept()
		if err != nil {
			return
		}
		g.track(c)
		first()
		g.wg.Add(1)
		go func() {
			defer g.wg.Done()
			<-g.open
			up, err := net.Dial("tcp", g.target)
			if err != nil {
				_ = c.Close()
				return
			}
			g.track(up)
			done := make(chan struct{}, 2)
			go func() { _, _ = io.Copy(up, c); done <- struct{}{} }()
			go func() { _, _ = io.Copy(c, up); done <- struct{}{} }()
			<-done
			_ = c.Close()
			_ = up.Close()
			<-done
		}()
	}
}

func (g *gate) track(c net.Conn) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.conns = append(g.conns, c)
}

func (g *gate) close() {
	_ = g.ln.Close()
	g.Open()
	g.mu.Lock()
	for _, c := range g.conns {
		_ = c.Close()
	}
	g.mu.Unlock()
	g.wg.Wait()
}

// writeRead writes a file through one workload's mount and reads it back through another's.
func writeRead(t *testing.T, ctx context.Context, s *s3stack.Stack, from, to *v1.Pod, name string) {
	t.Helper()
	data := []byte("from " + from.Name + " to " + to.Name + "\n")
	if err := os.WriteFile(filepath.Join(s.PublishPath(from), name), data, 0o644); err != nil {
		t.Fatalf("write through %s: %v", from.Name, err)
	}
	rig.Eventually(t, ctx, 30*time.Second, name+" through "+to.Name+"'s mount", func(context.Context) (bool, error) {
		got, err := os.ReadFile(filepath.Join(s.PublishPath(to), name))
		return string(got) == string(data), err
	})
}
