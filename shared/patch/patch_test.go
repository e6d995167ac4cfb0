package patch

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/stowage-csi/stowage/shared/testutil"
)

const attacherFinalizer = "external-attacher/ebs-csi-aws-com"

func pv(finalizers []string, annotations map[string]string) *corev1.PersistentVolume {
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "pv-1", Finalizers: finalizers, Annotations: annotations},
		Spec:       corev1.PersistentVolumeSpec{StorageClassName: "gp3"},
	}
}

func patches(c *fake.Clientset) []k8stesting.PatchAction {
	var out []k8stesting.PatchAction
	for _, a := range c.Actions() {
		if p, ok := a.(k8stesting.PatchAction); ok {
			out = append(out, p)
		}
	}
	return out
}

// seed stores obj in a resourceVersion-checking fake and returns the stored copy, as an informer would.
func seed(t *testing.T, obj *corev1.PersistentVolume) (*fake.Clientset, *corev1.PersistentVolume) {
	t.Helper()
	c := testutil.NewClientset(obj)
	stored, err := c.CoreV1().PersistentVolumes().Get(context.Background(), obj.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c.ClearActions()
	return c, stored
}

func TestHelpersSendOneRequestOrNone(t *testing.T) {
	type helper func(context.Context, Func[*corev1.PersistentVolume], *corev1.PersistentVolume) (*corev1.PersistentVolume, error)
	addFin := func(ctx context.Context, p Func[*corev1.PersistentVolume], o *corev1.PersistentVolume) (*corev1.PersistentVolume, error) {
		return AddFinalizer(ctx, p, o, attacherFinalizer)
	}
	rmFin := func(ctx context.Context, p Func[*corev1.PersistentVolume], o *corev1.PersistentVolume) (*corev1.PersistentVolume, error) {
		return RemoveFinalizer(ctx, p, o, attacherFinalizer)
	}
	setAnn := func(ctx context.Context, p Func[*corev1.PersistentVolume], o *corev1.PersistentVolume) (*corev1.PersistentVolume, error) {
		return SetAnnotation(ctx, p, o, "pv.kubernetes.io/provisioned-by", "ebs.csi.aws.com")
	}
	rmAnn := func(ctx context.Context, p Func[*corev1.PersistentVolume], o *corev1.PersistentVolume) (*corev1.PersistentVolume, error) {
		return RemoveAnnotation(ctx, p, o, "pv.kubernetes.io/provisioned-by")
	}
	status := func(ctx context.Context, p Func[*corev1.PersistentVolume], o *corev1.PersistentVolume) (*corev1.PersistentVolume, error) {
		return Status(ctx, p, o, func(o *corev1.PersistentVolume) { o.Status.Phase = corev1.VolumeBound })
	}
	ann := map[string]string{"pv.kubernetes.io/provisioned-by": "ebs.csi.aws.com"}

	tests := []struct {
		name            string
		obj             *corev1.PersistentVolume
		do              helper
		wantPatches     int
		wantFinalizers  []string
		wantAnnotations map[string]string
		wantPhase       corev1.PersistentVolumePhase
		wantSubresource string
	}{
		{name: "add finalizer", obj: pv([]string{"kubernetes.io/pv-protection"}, nil), do: addFin, wantPatches: 1,
			wantFinalizers: []string{"kubernetes.io/pv-protection", attacherFinalizer}},
		{name: "add present finalizer is a no-op", obj: pv([]string{attacherFinalizer}, nil), do: addFin,
			wantFinalizers: []string{attacherFinalizer}},
		{name: "remove finalizer", obj: pv([]string{"kubernetes.io/pv-protection", attacherFinalizer}, nil), do: rmFin, wantPatches: 1,
			wantFinalizers: []string{"kubernetes.io/pv-protection"}},
		{name: "remove last finalizer", obj: pv([]string{attacherFinalizer}, nil), do: rmFin, wantPatches: 1},
		{name: "remove absent finalizer is a no-op", obj: pv(nil, nil), do: rmFin},
		{name: "set annotation", obj: pv(nil, map[string]string{"other": "x"}), do: setAnn, wantPatches: 1,
			wantAnnotations: map[string]string{"other": "x", "pv.kubernetes.io/provisioned-by": "ebs.csi.aws.com"}},
		{name: "set equal annotation is a no-op", obj: pv(nil, ann), do: setAnn, wantAnnotations: ann},
		{name: "remove annotation", obj: pv(nil, map[string]string{"other": "x", "pv.kubernetes.io/provisioned-by": "y"}), do: rmAnn,
			wantPatches: 1, wantAnnotations: map[string]string{"other": "x"}},
		{name: "remove absent annotation is a no-op", obj: pv(nil, nil), do: rmAnn},
		{name: "status", obj: pv(nil, nil), do: status, wantPatches: 1, wantPhase: corev1.VolumeBound, wantSubresource: "status"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, stored := seed(t, tt.obj)
			got, err := tt.do(context.Background(), c.CoreV1().PersistentVolumes().Patch, stored)
			if err != nil {
				t.Fatal(err)
			}
			ps := patches(c)
			if len(ps) != tt.wantPatches || len(c.Actions()) != tt.wantPatches {
				t.Fatalf("%d patches in %d actions, want %d and nothing else", len(ps), len(c.Actions()), tt.wantPatches)
			}
			if !slices.Equal(got.Finalizers, tt.wantFinalizers) {
				t.Errorf("finalizers %v, want %v", got.Finalizers, tt.wantFinalizers)
			}
			if len(got.Annotations) != len(tt.wantAnnotations) {
				t.Errorf("annotations %v, want %v", got.Annotations, tt.wantAnnotations)
			}
			for k, v := range tt.wantAnnotations {
				if got.Annotations[k] != v {
					t.Errorf("annotation %s = %q, want %q", k, got.Annotations[k], v)
				}
			}
			if got.Status.Phase != tt.wantPhase {
				t.Errorf("phase %q, want %q", got.Status.Phase, tt.wantPhase)
			}
			if got.Spec.StorageClassName != "gp3" {
				t.Errorf("patch touched the spec: storageClassName %q", got.Spec.StorageClassName)
			}
			if len(ps) == 0 {
				return
			}
			p := ps[0]
			if p.GetPatchType() != types.MergePatchType || p.GetSubresource() != tt.wantSubresource {
				t.Errorf("patch type %s subresource %q, want merge patch on %q", p.GetPatchType(), p.GetSubresource(), tt.wantSubresource)
			}
			var body struct {
				Metadata map[string]json.RawMessage `json:"metadata"`
				Spec     json.RawMessage            `json:"spec"`
			}
			if err := json.Unmarshal(p.GetPatch(), &body); err != nil {
				t.Fatal(err)
			}
			if string(body.Metadata["resourceVersion"]) != `"`+stored.ResourceVersion+`"` {
				t.Errorf("patch %s lacks the resourceVersion precondition %q", p.GetPatch(), stored.ResourceVersion)
			}
			if body.Spec != nil {
				t.Errorf("patch %s carries the spec", p.GetPatch())
			}
		})
	}
}

func TestStalePatchConflicts(t *testing.T) {
	c, stored := seed(t, pv(nil, nil))
	// Someone else writes after our read.
	other := stored.DeepCopy()
	other.Finalizers = []string{"kubernetes.io/pv-protection"}
	if _, err := c.CoreV1().PersistentVolumes().Update(context.Background(), other, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err := AddFinalizer(context.Background(), c.CoreV1().PersistentVolumes().Patch, stored, attacherFinalizer)
	if !apierrors.IsConflict(err) {
		t.Fatalf("patch with a stale resourceVersion: %v, want Conflict", err)
	}
}

func TestRetryOnConflictSurvivesConcurrentWriter(t *testing.T) {
	ctx := context.Background()
	c, stored := seed(t, pv(nil, nil))
	pvs := c.CoreV1().PersistentVolumes()

	// The concurrent writer strikes between our read and our first patch.
	wrote := false
	racyPatch := func(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, sub ...string) (*corev1.PersistentVolume, error) {
		if !wrote {
			wrote = true
			cur, err := pvs.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return nil, err
			}
			cur.Finalizers = append(cur.Finalizers, "kubernetes.io/pv-protection")
			if _, err := pvs.Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
				return nil, err
			}
		}
		return pvs.Patch(ctx, name, pt, data, opts, sub...)
	}
	c.ClearActions()
	got, err := RetryOnConflict(ctx, stored,
		func(ctx context.Context) (*corev1.PersistentVolume, error) {
			return pvs.Get(ctx, stored.Name, metav1.GetOptions{})
		},
		func(ctx context.Context, o *corev1.PersistentVolume) (*corev1.PersistentVolume, error) {
			return AddFinalizer(ctx, racyPatch, o, attacherFinalizer)
		})
	if err != nil {
		t.Fatalf("RetryOnConflict: %v", err)
	}
	want := []string{"kubernetes.io/pv-protection", attacherFinalizer}
	if !slices.Equal(got.Finalizers, want) {
		t.Errorf("finalizers %v, want %v (the concurrent writer's finalizer must survive)", got.Finalizers, want)
	}
	var verbs []string
	for _, a := range c.Actions() {
		verbs = append(verbs, a.GetVerb())
	}
	// get+update are the concurrent writer; then our conflicting patch, the re-read and the successful patch.
	wantVerbs := []string{"get", "update", "patch", "get", "patch"}
	if !slices.Equal(verbs, wantVerbs) {
		t.Errorf("actions %v, want %v", verbs, wantVerbs)
	}
}

func TestRetryOnConflictReturnsOtherErrors(t *testing.T) {
	c, stored := seed(t, pv(nil, nil))
	if err := c.CoreV1().PersistentVolumes().Delete(context.Background(), stored.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	gets := 0
	_, err := RetryOnConflict(context.Background(), stored,
		func(context.Context) (*corev1.PersistentVolume, error) { gets++; return stored, nil },
		func(ctx context.Context, o *corev1.PersistentVolume) (*corev1.PersistentVolume, error) {
			return AddFinalizer(ctx, c.CoreV1().PersistentVolumes().Patch, o, attacherFinalizer)
		})
	if !apierrors.IsNotFound(err) || gets != 0 {
		t.Fatalf("RetryOnConflict() = %v after %d gets, want NotFound at once", err, gets)
	}
}

func TestMutateNeedsResourceVersion(t *testing.T) {
	calls := 0
	p := func(context.Context, string, types.PatchType, []byte, metav1.PatchOptions, ...string) (*corev1.PersistentVolume, error) {
		calls++
		return nil, nil
	}
	if _, err := AddFinalizer(context.Background(), p, pv(nil, nil), attacherFinalizer); err == nil || calls != 0 {
		t.Fatalf("AddFinalizer on an object without resourceVersion: err %v, %d calls; want an error and no call", err, calls)
	}
}

func TestHelpersWorkWithDynamicClient(t *testing.T) {
	gvr := schema.GroupVersionResource{Group: "snapshot.storage.k8s.io", Version: "v1", Resource: "volumesnapshotcontents"}
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshotContent",
		"metadata": map[string]any{"name": "snapcontent-1", "resourceVersion": "7"},
	}}
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{gvr: "VolumeSnapshotContentList"}, obj)
	res := client.Resource(gvr)
	got, err := SetAnnotation(context.Background(), res.Patch, obj, "snapshot.storage.kubernetes.io/volumesnapshot-being-created", "yes")
	if err != nil {
		t.Fatal(err)
	}
	if got.GetAnnotations()["snapshot.storage.kubernetes.io/volumesnapshot-being-created"] != "yes" {
		t.Errorf("annotations %v", got.GetAnnotations())
	}
	n := 0
	for _, a := range client.Actions() {
		if a.GetVerb() == "patch" {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d patches, want 1", n)
	}
}
