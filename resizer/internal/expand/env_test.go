package expand

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/stowage-csi/stowage/resizer/internal/slow"
	"github.com/stowage-csi/stowage/resizer/internal/testutil"
)

// env is one handler over a fake clientset; its PersistentVolume lister is refreshed from the clientset before
// every sync, as an informer that has caught up would be.
type env struct {
	*testutil.Env
	handler *Handler
}

type envOpts struct {
	trivial bool
	inUse   InUse
}

func newEnv(t *testing.T, o envOpts, fakeCSI *testutil.FakeCSI, objs ...runtime.Object) *env {
	t.Helper()
	e := &env{Env: testutil.NewEnv(fakeCSI, objs...)}
	var r Resizer = NewCSI(e.CSI, e.Client, false)
	if o.trivial {
		r = Trivial{}
	}
	e.handler = New(Config{
		Driver:           testutil.Driver,
		Client:           e.Client,
		PVLister:         e.PVLister(),
		Resizer:          r,
		Events:           e.Events,
		AnnotateFsResize: true,
		InUse:            o.inUse,
		Slow:             slow.New(testutil.RetryMax, func() time.Time { return testutil.Now }),
		Now:              func() time.Time { return testutil.Now },
	})
	return e
}

// sync runs the handler on the stored claim, with the actions list and Events emptied first.
func (e *env) sync(t *testing.T, name string) (time.Duration, error) {
	t.Helper()
	pvc := e.PVC(t, name)
	return e.handler.Sync(e.BeforeSync(t), pvc)
}

// resizeState sets status.allocatedResources and allocatedResourceStatuses for storage.
func resizeState(allocated string, state v1.ClaimResourceStatus) func(*v1.PersistentVolumeClaim) {
	return func(p *v1.PersistentVolumeClaim) {
		p.Status.AllocatedResources = v1.ResourceList{v1.ResourceStorage: mustQ(allocated)}
		p.Status.AllocatedResourceStatuses = map[v1.ResourceName]v1.ClaimResourceStatus{v1.ResourceStorage: state}
	}
}

type usedClaims map[string]bool

func (u usedClaims) Used(namespace, claim string) bool { return u[namespace+"/"+claim] }
