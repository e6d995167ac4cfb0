package provision

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/kubernetes/scheme"
	corelisters "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/stowage-csi/stowage/provisioner/internal/testutil"
	sharedtestutil "github.com/stowage-csi/stowage/shared/testutil"
)

// harness is a Provisioner over a fake clientset whose listers are filled with the same objects.
type harness struct {
	p       *Provisioner
	kube    *fake.Clientset
	csi     *testutil.FakeCSI
	rec     *record.FakeRecorder
	indexer map[string]cache.Indexer
	journal *Journal
}

// The journal's place in the harness.
const (
	journalNS   = "kube-system"
	journalName = "test-csi-example-com-intents"
)

func defaultConfig() Config {
	return Config{
		DriverName: testutil.Driver, Identity: "id-1", VolumeNamePrefix: "pvc", VolumeNameUUIDLength: -1,
		Timeout: 10 * time.Second, ImmediateTopology: true, PreventVolumeModeConversion: true,
		Capabilities: Capabilities{Clone: true},
	}
}

// newHarness seeds a fake clientset that checks resourceVersion preconditions like the API server
// (shared/testutil), and gives each of objs the resourceVersion it got there, so tests can hand the same objects
// to the provisioner as an informer would.
func newHarness(t *testing.T, cfg Config, objs ...runtime.Object) *harness {
	t.Helper()
	kube := sharedtestutil.NewClientset(objs...)
	for _, o := range objs {
		if err := stampVersion(kube, o); err != nil {
			t.Fatal(err)
		}
	}
	h := &harness{
		kube:    kube,
		csi:     testutil.NewFakeCSI(),
		rec:     record.NewFakeRecorder(100),
		indexer: map[string]cache.Indexer{},
	}
	for _, k := range []string{"pvc", "pv", "sc", "csinode", "node", "va"} {
		h.indexer[k] = cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	}
	for _, o := range objs {
		h.cache(t, o)
	}
	// The record's Lease exists, as it does once a provisioner has run, and was loaded at start-up.
	if _, err := kube.CoordinationV1().Leases(journalNS).Create(context.Background(), &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: journalNS, Name: journalName},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.journal = NewJournal(h.kube.CoordinationV1().Leases(journalNS), JournalConfig{Name: journalName})
	if _, err := h.journal.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	go h.journal.Run(ctx)
	h.p = New(cfg, Deps{
		Kube: h.kube, CSI: h.csi, Recorder: h.rec, Journal: h.journal,
		Claims:      corelisters.NewPersistentVolumeClaimLister(h.indexer["pvc"]),
		Volumes:     corelisters.NewPersistentVolumeLister(h.indexer["pv"]),
		Classes:     storagelisters.NewStorageClassLister(h.indexer["sc"]),
		CSINodes:    storagelisters.NewCSINodeLister(h.indexer["csinode"]),
		Nodes:       corelisters.NewNodeLister(h.indexer["node"]),
		Attachments: storagelisters.NewVolumeAttachmentLister(h.indexer["va"]),
	})
	h.kube.ClearActions()
	return h
}

// stampVersion sets o's resourceVersion to that of the stored object of the same kind and name.
func stampVersion(kube *fake.Clientset, o runtime.Object) error {
	kinds, _, err := scheme.Scheme.ObjectKinds(o)
	if err != nil {
		return err
	}
	m, err := meta.Accessor(o)
	if err != nil {
		return err
	}
	gvr, _ := meta.UnsafeGuessKindToResource(kinds[0])
	stored, err := kube.Tracker().Get(gvr, m.GetNamespace(), m.GetName())
	if err != nil {
		return err
	}
	sm, err := meta.Accessor(stored)
	if err != nil {
		return err
	}
	m.SetResourceVersion(sm.GetResourceVersion())
	return nil
}

// cache puts o into its lister, as an informer would.
func (h *harness) cache(t *testing.T, o runtime.Object) {
	t.Helper()
	var k string
	switch o.(type) {
	case *v1.PersistentVolumeClaim:
		k = "pvc"
	case *v1.PersistentVolume:
		k = "pv"
	case *storagev1.StorageClass:
		k = "sc"
	case *storagev1.CSINode:
		k = "csinode"
	case *v1.Node:
		k = "node"
	case *storagev1.VolumeAttachment:
		k = "va"
	default:
		return
	}
	if err := h.indexer[k].Add(o); err != nil {
		t.Fatal(err)
	}
}

// actions lists the API requests made since the harness was built, as "verb resource[/subresource]".
func (h *harness) actions() []string {
	var out []string
	for _, a := range h.kube.Actions() {
		s := a.GetVerb() + " " + a.GetResource().Resource
		if a.GetSubresource() != "" {
			s += "/" + a.GetSubresource()
		}
		out = append(out, s)
	}
	return out
}

// leaseEntries reads the entries the record's Lease holds on the (fake) API server, after writing what is
// pending.
func (h *harness) leaseEntries(t *testing.T) map[types.UID]journalEntry {
	t.Helper()
	h.journal.Flush(context.Background())
	lease, err := h.kube.CoordinationV1().Leases(journalNS).Get(context.Background(), journalName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return parseEntries(klog.Background(), lease)
}

// events drains the recorded events.
func (h *harness) events() []string {
	var out []string
	for {
		select {
		case e := <-h.rec.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func (h *harness) claim(t *testing.T, ns, name string) *v1.PersistentVolumeClaim {
	t.Helper()
	c, err := h.kube.CoreV1().PersistentVolumeClaims(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func (h *harness) pv(t *testing.T, name string) *v1.PersistentVolume {
	t.Helper()
	pv, err := h.kube.CoreV1().PersistentVolumes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return pv
}

// failPatches makes every PVC patch fail, to check what a sync writes before a given step.
func (h *harness) failVerb(verb, resource string) {
	h.kube.PrependReactor(verb, resource, func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, fmt.Errorf("injected %s %s failure", verb, resource)
	})
}

func equal(a, b []string) bool { return strings.Join(a, "|") == strings.Join(b, "|") }

func hasEvent(events []string, substrs ...string) bool {
	for _, e := range events {
		ok := true
		for _, s := range substrs {
			ok = ok && strings.Contains(e, s)
		}
		if ok {
			return true
		}
	}
	return false
}
