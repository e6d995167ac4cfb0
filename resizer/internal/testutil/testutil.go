// Package testutil holds the resizer's test helpers: object builders, listers over fixed objects, a fake
// CSI controller that records its calls, and compact views of a fake clientset's requests and of Events.
package testutil

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	sharedtest "github.com/stowage-csi/stowage/shared/testutil"

	"github.com/container-storage-interface/spec/lib/go/csi"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
)

// Now is the clock of the handlers under test, so that the times they write are known.
var Now = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// RetryMax is --retry-interval-max in the tests: how long an infeasible request waits before it is retried.
const RetryMax = 30 * time.Minute

// Driver is the CSI driver name the tests use.
const Driver = "csi.example.com"

// Namespace is the claims' namespace.
const Namespace = "ns"

// PVC builds a claim bound to volume pv, requesting request with status.capacity capacity.
func PVC(name, pv, request, capacity string, opts ...func(*v1.PersistentVolumeClaim)) *v1.PersistentVolumeClaim {
	pvc := &v1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: name, UID: types.UID("uid-" + name)},
		Spec: v1.PersistentVolumeClaimSpec{
			VolumeName:  pv,
			AccessModes: []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
			Resources:   v1.VolumeResourceRequirements{Requests: v1.ResourceList{v1.ResourceStorage: resource.MustParse(request)}},
		},
		Status: v1.PersistentVolumeClaimStatus{
			Phase:    v1.ClaimBound,
			Capacity: v1.ResourceList{v1.ResourceStorage: resource.MustParse(capacity)},
		},
	}
	for _, o := range opts {
		o(pvc)
	}
	return pvc
}

// PV builds a CSI volume of Driver with handle and capacity, bound to claim (in Namespace, uid-<claim>).
func PV(name, handle, capacity, claim string, opts ...func(*v1.PersistentVolume)) *v1.PersistentVolume {
	pv := &v1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1.PersistentVolumeSpec{
			Capacity:               v1.ResourceList{v1.ResourceStorage: resource.MustParse(capacity)},
			AccessModes:            []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
			PersistentVolumeSource: v1.PersistentVolumeSource{CSI: &v1.CSIPersistentVolumeSource{Driver: Driver, VolumeHandle: handle, FSType: "ext4"}},
			ClaimRef:               &v1.ObjectReference{Namespace: Namespace, Name: claim, UID: types.UID("uid-" + claim)},
		},
	}
	for _, o := range opts {
		o(pv)
	}
	return pv
}

// VAC builds a VolumeAttributesClass of Driver.
func VAC(name string, params map[string]string) *storagev1.VolumeAttributesClass {
	return &storagev1.VolumeAttributesClass{ObjectMeta: metav1.ObjectMeta{Name: name}, DriverName: Driver, Parameters: params}
}

// Listers returns listers over exactly objs.
func Listers(objs ...any) (corelisters.PersistentVolumeLister, storagelisters.VolumeAttributesClassLister) {
	pvs := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	vacs := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, o := range objs {
		switch o := o.(type) {
		case *v1.PersistentVolume:
			_ = pvs.Add(o)
		case *storagev1.VolumeAttributesClass:
			_ = vacs.Add(o)
		}
	}
	return corelisters.NewPersistentVolumeLister(pvs), storagelisters.NewVolumeAttributesClassLister(vacs)
}

// Actions lists a fake clientset's requests as "verb resource[/subresource] name".
func Actions(client *fake.Clientset) []string { return sharedtest.Actions(client) }

// UnguardedPatches lists the patches that carry no metadata.resourceVersion precondition.
func UnguardedPatches(client *fake.Clientset) []string {
	var out []string
	for _, a := range client.Actions() {
		p, ok := a.(clienttesting.PatchAction)
		if !ok {
			continue
		}
		var body struct {
			Metadata struct {
				ResourceVersion string `json:"resourceVersion"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal(p.GetPatch(), &body); err != nil || body.Metadata.ResourceVersion == "" {
			out = append(out, fmt.Sprintf("%s %s: %s", p.GetResource().Resource, p.GetName(), p.GetPatch()))
		}
	}
	return out
}

// Events drains a fake recorder into "Type Reason" strings.
func Events(r *record.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-r.Events:
			var typ, reason string
			_, _ = fmt.Sscanf(e, "%s %s", &typ, &reason)
			out = append(out, typ+" "+reason)
		default:
			return out
		}
	}
}

// FakeCSI records ControllerExpandVolume and ControllerModifyVolume calls and answers with what is set.
type FakeCSI struct {
	mu sync.Mutex
	// ExpandBytes is the size reported; 0 echoes the request.
	ExpandBytes   int64
	NodeExpansion bool
	ExpandErr     error
	ModifyErr     error
	Expands       []*csi.ControllerExpandVolumeRequest
	Modifies      []*csi.ControllerModifyVolumeRequest
}

// Expand records req.
func (f *FakeCSI) Expand(_ context.Context, req *csi.ControllerExpandVolumeRequest) (int64, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Expands = append(f.Expands, req)
	if f.ExpandErr != nil {
		return 0, false, f.ExpandErr
	}
	if f.ExpandBytes != 0 {
		return f.ExpandBytes, f.NodeExpansion, nil
	}
	return req.GetCapacityRange().GetRequiredBytes(), f.NodeExpansion, nil
}

// Modify records req.
func (f *FakeCSI) Modify(_ context.Context, req *csi.ControllerModifyVolumeRequest) error {
	return sharedtest.Record(&f.mu, &f.Modifies, req, &f.ModifyErr)
}
