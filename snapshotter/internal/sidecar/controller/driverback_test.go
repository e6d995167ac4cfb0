package controller

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	groupv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	snapfake "github.com/kubernetes-csi/external-snapshotter/client/v8/clientset/versioned/fake"
	snapinformers "github.com/kubernetes-csi/external-snapshotter/client/v8/informers/externalversions"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2/ktesting"

	sharedtestutil "github.com/stowage-csi/stowage/shared/testutil"
	"github.com/stowage-csi/stowage/shared/workqueue/queuetest"
	"github.com/stowage-csi/stowage/snapshotter/internal/sidecar/sidecartest"
)

// downDriver fails every sync while the driver is down, and counts the syncs of each object, all and
// successful ones.
type downDriver struct {
	mu    sync.Mutex
	down  bool
	syncs map[string]int
	ok    map[string]int
}

func newDownDriver() *downDriver {
	return &downDriver{down: true, syncs: map[string]int{}, ok: map[string]int{}}
}

func (d *downDriver) sync(name string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.syncs[name]++
	if d.down {
		return errors.New("rpc error: code = Unavailable desc = connection refused")
	}
	d.ok[name]++
	return nil
}

func (d *downDriver) setDown(down bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.down = down
}

func (d *downDriver) counts(name string) (syncs, ok int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.syncs[name], d.ok[name]
}

// contentHandler and groupHandler are the two controllers' handlers over one downDriver each.
type contentHandler struct{ *downDriver }

func (h contentHandler) Sync(_ context.Context, c *snapv1.VolumeSnapshotContent) (time.Duration, error) {
	return 0, h.sync(c.Name)
}

func (contentHandler) Forget(types.UID) {}

type groupHandler struct{ *downDriver }

func (h groupHandler) Sync(_ context.Context, gc *groupv1.VolumeGroupSnapshotContent) (time.Duration, error) {
	return 0, h.sync(gc.Name)
}

func (groupHandler) Forget(types.UID) {}

func groupContent(name string) *groupv1.VolumeGroupSnapshotContent {
	return &groupv1.VolumeGroupSnapshotContent{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name)},
		Spec: groupv1.VolumeGroupSnapshotContentSpec{
			Driver: sidecartest.Driver, DeletionPolicy: snapv1.VolumeSnapshotContentDelete,
			Source: groupv1.VolumeGroupSnapshotContentSource{VolumeHandles: []string{"vol-1", "vol-2"}},
		},
	}
}

// A content and a group content whose syncs failed while the driver was away wait an hour of backoff here;
// DriverBack, the driver's return, retries each at once, and leaves alone the ones whose sync succeeded.
func TestDriverBackRetriesFailedContents(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	content := sidecartest.Content("c1", "vol-1")
	content.ResourceVersion = ""
	//lint:ignore SA1019 the snapshot client module generates no apply configurations, so it has no NewClientset.
	client := snapfake.NewSimpleClientset(content, groupContent("g1"))
	factory := snapinformers.NewSharedInformerFactory(client, 0)
	queue := queuetest.SlowRetry(t)
	contents, groups := newDownDriver(), newDownDriver()
	// One worker per queue takes keys in order, which the check that nothing else was retried relies on.
	ctrl, err := New(Config{
		Driver: sidecartest.Driver, Handler: contentHandler{contents}, Contents: factory.Snapshot().V1().VolumeSnapshotContents(),
		Classes: factory.Snapshot().V1().VolumeSnapshotClasses(), Queue: queue("content"), Workers: 1,
	})
	if err != nil {
		t.Fatal(err)
	}
	groupCtrl, err := NewGroup(GroupConfig{
		Driver: sidecartest.Driver, Handler: groupHandler{groups}, Contents: factory.Groupsnapshot().V1().VolumeGroupSnapshotContents(),
		Classes: factory.Groupsnapshot().V1().VolumeGroupSnapshotClasses(), Queue: queue("group"), Workers: 1,
	})
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	stopped := make(chan error, 2)
	go func() { stopped <- ctrl.Run(ctx) }()
	go func() { stopped <- groupCtrl.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		for range 2 {
			if err := <-stopped; err != nil {
				t.Errorf("Run() = %v", err)
			}
		}
		factory.Shutdown()
	})
	wait := func(d *downDriver, name, what string, cond func(syncs, ok int) bool) {
		t.Helper()
		sharedtestutil.Eventually(t, 10*time.Second, name+": "+what, func() (bool, error) { return cond(d.counts(name)), nil })
	}
	createContent := func(name string) {
		t.Helper()
		c := sidecartest.Content(name, "vol-1")
		c.ResourceVersion = ""
		if _, err := client.SnapshotV1().VolumeSnapshotContents().Create(ctx, c, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	createGroup := func(name string) {
		t.Helper()
		if _, err := client.GroupsnapshotV1().VolumeGroupSnapshotContents().Create(ctx, groupContent(name), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	wait(contents, "c1", "a failed sync while the driver is down", func(syncs, _ int) bool { return syncs == 1 })
	wait(groups, "g1", "a failed sync while the driver is down", func(syncs, _ int) bool { return syncs == 1 })
	contents.setDown(false)
	groups.setDown(false)
	// c2 and g2 arrive once the driver is back and sync at once: nothing for DriverBack to retry.
	createContent("c2")
	createGroup("g2")
	wait(contents, "c2", "a successful sync", func(_, ok int) bool { return ok == 1 })
	wait(groups, "g2", "a successful sync", func(_, ok int) bool { return ok == 1 })

	ctrl.DriverBack(ctx)
	groupCtrl.DriverBack(ctx)
	wait(contents, "c1", "a successful sync after the driver came back", func(_, ok int) bool { return ok == 1 })
	wait(groups, "g1", "a successful sync after the driver came back", func(_, ok int) bool { return ok == 1 })
	// c3 and g3 are queued after DriverBack: once they are synced, a c2 or g2 DriverBack had queued would
	// have been synced again.
	createContent("c3")
	createGroup("g3")
	wait(contents, "c3", "a successful sync", func(_, ok int) bool { return ok == 1 })
	wait(groups, "g3", "a successful sync", func(_, ok int) bool { return ok == 1 })
	for name, d := range map[string]*downDriver{"c2": contents, "g2": groups} {
		if syncs, _ := d.counts(name); syncs != 1 {
			t.Errorf("syncs of %s = %d, want 1 (DriverBack retried an object that had synced)", name, syncs)
		}
	}
}
