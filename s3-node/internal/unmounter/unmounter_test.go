package unmounter

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	mountutils "k8s.io/mount-utils"

	"github.com/stowage-csi/stowage/s3-node/internal/mounter"
	"github.com/stowage-csi/stowage/s3-node/internal/testutil"
	"github.com/stowage-csi/stowage/shared/s3api"
)

type rig struct {
	u     *Unmounter
	sys   *testutil.FakeSys
	paths mounter.Paths
	pods  cache.Indexer
}

func newRig(t *testing.T, pods ...*corev1.Pod) *rig {
	r := &rig{sys: testutil.NewFakeSys(), paths: mounter.Paths{Kubelet: t.TempDir()}}
	r.pods = cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, p := range pods {
		_ = r.pods.Add(p)
	}
	m := mounter.New(mounter.Config{Sys: r.sys, Paths: r.paths})
	r.u = New(Config{Mounter: m, Pods: corelisters.NewPodLister(r.pods).Pods("mount-s3"), BindPoll: 5 * time.Millisecond, BindWait: 50 * time.Millisecond})
	return r
}

// mountSource makes a served source for the Pod with one workload bind, its comm dir and credentials.
func (r *rig) mountSource(t *testing.T, name, uid string) (source, bind string) {
	source = r.paths.Source(name)
	bind = filepath.Join(r.paths.Kubelet, "pods", "w1", "volumes", "kubernetes.io~csi", "pv", "mount")
	_ = os.MkdirAll(source, 0o750)
	_ = os.MkdirAll(filepath.Join(r.paths.CommDir(uid), "credentials"), 0o750)
	_ = os.WriteFile(filepath.Join(r.paths.CommDir(uid), "credentials", "token"), []byte("t"), 0o640)
	r.sys.AddMount(mountutils.MountInfo{MountPoint: source, Source: "mountpoint-s3", FsType: "fuse", Minor: 7})
	r.sys.AddMount(mountutils.MountInfo{MountPoint: bind, Source: "mountpoint-s3", FsType: "fuse", Minor: 7})
	return source, bind
}

func mpPod(name, uid string, needsUnmount bool) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "mount-s3", UID: types.UID(uid)}}
	if needsUnmount {
		p.Annotations = map[string]string{s3api.AnnotationNeedsUnmount: "true"}
	}
	return p
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func TestTeardownWaitsForBindsThenCleansUp(t *testing.T) {
	pod := mpPod("mp-1", "uid-1", true)
	r := newRig(t, pod)
	source, bind := r.mountSource(t, "mp-1", "uid-1")
	comm := r.paths.CommDir("uid-1")
	ctx := context.Background()

	// A workload still bound: mount.exit is there, the source stays, the next sweep retries.
	err := r.u.Teardown(ctx, pod)
	if err == nil || !strings.Contains(err.Error(), "still bound") {
		t.Fatalf("Teardown with a bind: %v", err)
	}
	if !exists(filepath.Join(comm, "mount.exit")) || !exists(source) || len(r.sys.MountPoints()) != 2 {
		t.Fatalf("after the first attempt: exit %v, source %v, mounts %v", exists(filepath.Join(comm, "mount.exit")), exists(source), r.sys.MountPoints())
	}
	// The kubelet unpublished the workload: the source goes, with its directory and the credentials.
	if err := r.sys.Unmount(bind, 0); err != nil {
		t.Fatal(err)
	}
	if err := r.u.Teardown(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if len(r.sys.MountPoints()) != 0 || exists(source) || exists(filepath.Join(comm, "credentials")) {
		t.Fatalf("left: mounts %v, source %v, credentials %v", r.sys.MountPoints(), exists(source), exists(filepath.Join(comm, "credentials")))
	}
	// Idempotent.
	if err := r.u.Teardown(ctx, pod); err != nil {
		t.Fatal(err)
	}
}

// Unmounting the source ends Mountpoint and so the Pod, whose comm dir the kubelet then tears down: the
// credentials must be gone by then, removed by the node that wrote them.
func TestTeardownRemovesCredentialsBeforeTheSourceUnmount(t *testing.T) {
	pod := mpPod("mp-1", "uid-1", true)
	r := newRig(t, pod)
	source, bind := r.mountSource(t, "mp-1", "uid-1")
	creds := filepath.Join(r.paths.CommDir("uid-1"), "credentials")
	if err := r.sys.Unmount(bind, 0); err != nil {
		t.Fatal(err)
	}
	var unmounted, credsAtUnmount bool
	r.sys.OnUnmount = func(target string) {
		if target == source {
			unmounted, credsAtUnmount = true, exists(creds)
		}
	}
	if err := r.u.Teardown(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	if !unmounted || credsAtUnmount {
		t.Errorf("source unmounted %v, credentials still there at the unmount %v; want unmounted after they went", unmounted, credsAtUnmount)
	}
}

func TestSweep(t *testing.T) {
	keep := mpPod("mp-keep", "uid-keep", false)
	gone := mpPod("mp-gone", "uid-gone", true)
	r := newRig(t, keep, gone)
	keepSrc := r.paths.Source("mp-keep")
	_ = os.MkdirAll(keepSrc, 0o750)
	r.sys.AddMount(mountutils.MountInfo{MountPoint: keepSrc, Source: "mountpoint-s3", FsType: "fuse", Minor: 1})
	goneSrc := r.paths.Source("mp-gone")
	_ = os.MkdirAll(goneSrc, 0o750)
	_ = os.MkdirAll(r.paths.CommDir("uid-gone"), 0o750)
	r.sys.AddMount(mountutils.MountInfo{MountPoint: goneSrc, Source: "mountpoint-s3", FsType: "fuse", Minor: 2})
	dangling := r.paths.Source("mp-deleted")
	_ = os.MkdirAll(dangling, 0o750)
	r.sys.AddMount(mountutils.MountInfo{MountPoint: dangling, Source: "mountpoint-s3", FsType: "fuse", Minor: 3})
	emptyDangling := r.paths.Source("mp-never-mounted")
	_ = os.MkdirAll(emptyDangling, 0o750)

	r.u.Sweep(context.Background())
	r.u.wg.Wait()
	if got := r.sys.MountPoints(); len(got) != 1 || got[0] != keepSrc {
		t.Fatalf("mounts after the sweep %v, want only %s", got, keepSrc)
	}
	if exists(goneSrc) || exists(dangling) || exists(emptyDangling) || !exists(keepSrc) {
		t.Fatal("the sweep removed the wrong source directories")
	}
	if !exists(filepath.Join(r.paths.CommDir("uid-gone"), "mount.exit")) {
		t.Fatal("no mount.exit for the marked Pod")
	}
}

func TestOnPodUpdateTriggersOnlyMarkedPods(t *testing.T) {
	r := newRig(t)
	r.u.OnPodUpdate(nil, mpPod("a", "u", false))
	select {
	case <-r.u.trigger:
		t.Fatal("an unmarked Pod triggered a sweep")
	default:
	}
	r.u.OnPodUpdate(nil, mpPod("a", "u", true))
	select {
	case <-r.u.trigger:
	default:
		t.Fatal("a marked Pod did not trigger a sweep")
	}
}
