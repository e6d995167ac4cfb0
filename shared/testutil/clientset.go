package testutil

import (
	"encoding/json"
	"errors"
	"strconv"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// NewClientset returns client-go's fake clientset with the API server's optimistic concurrency added.
//
// The plain fake neither sets metadata.resourceVersion nor checks it: an Update with a stale object succeeds,
// and a merge patch carrying metadata.resourceVersion is applied whatever that version is. Code whose
// correctness rests on those preconditions cannot be tested against it. This one gives every object a
// resourceVersion that changes on each write, and answers 409 Conflict, like the API server, to an Update or a
// merge patch whose resourceVersion is not the current one. A JSON patch `test` op on /metadata/resourceVersion
// is then enforced too, but fails with the patch library's error where the API server answers 422.
func NewClientset(objects ...runtime.Object) *fake.Clientset {
	c := fake.NewClientset()
	v := &versioned{tracker: c.Tracker(), apply: k8stesting.ObjectReaction(c.Tracker())}
	for _, o := range objects {
		o = o.DeepCopyObject()
		if m, err := meta.Accessor(o); err == nil {
			m.SetResourceVersion(v.next())
		}
		if err := v.tracker.Add(o); err != nil {
			panic(err) // seed objects are test input; a bad one is a bug in the test
		}
	}
	c.PrependReactor("*", "*", v.react)
	return c
}

// versioned is the reactor that keeps resourceVersions: one counter for every object, like the API server's
// storage revision, so a version is never reused.
type versioned struct {
	tracker k8stesting.ObjectTracker
	apply   k8stesting.ReactionFunc

	mu      sync.Mutex
	version int
}

func (v *versioned) next() string {
	v.version++
	return strconv.Itoa(v.version)
}

// react handles the writes; reads, and what it does not handle, fall through to the fake's own reactors.
func (v *versioned) react(action k8stesting.Action) (bool, runtime.Object, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	// Switch on the verb: UpdateAction has CreateAction's method set, so a type switch cannot tell them apart.
	switch action.GetVerb() {
	case "create":
		if a, ok := action.(k8stesting.CreateAction); ok {
			return v.create(a)
		}
	case "update":
		if a, ok := action.(k8stesting.UpdateAction); ok {
			return v.update(a)
		}
	case "patch":
		if a, ok := action.(k8stesting.PatchAction); ok {
			return v.patch(a)
		}
	}
	return false, nil, nil
}

func (v *versioned) create(a k8stesting.CreateAction) (bool, runtime.Object, error) {
	obj := a.GetObject().DeepCopyObject()
	m, err := meta.Accessor(obj)
	if err != nil {
		return false, nil, nil
	}
	m.SetResourceVersion(v.next())
	if err := v.tracker.Create(a.GetResource(), obj, a.GetNamespace()); err != nil {
		return true, nil, err
	}
	return true, obj, nil
}

// update answers 409 to an object whose resourceVersion is set and not the current one.
func (v *versioned) update(a k8stesting.UpdateAction) (bool, runtime.Object, error) {
	m, err := meta.Accessor(a.GetObject())
	if err != nil {
		return false, nil, nil
	}
	cur, err := v.current(a, m.GetName())
	if err != nil {
		return true, nil, err
	}
	if rv := m.GetResourceVersion(); rv != "" && rv != cur {
		return true, nil, conflict(a, m.GetName())
	}
	obj, err := v.stamp(a, a.GetObject())
	return true, obj, err
}

// patch answers 409 to a merge patch whose metadata.resourceVersion is set and not the current one.
func (v *versioned) patch(a k8stesting.PatchAction) (bool, runtime.Object, error) {
	cur, err := v.current(a, a.GetName())
	if err != nil {
		return true, nil, err
	}
	if a.GetPatchType() == types.MergePatchType || a.GetPatchType() == types.StrategicMergePatchType {
		var body struct {
			Metadata struct {
				ResourceVersion string `json:"resourceVersion"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal(a.GetPatch(), &body); err != nil {
			return true, nil, apierrors.NewBadRequest(err.Error())
		}
		if rv := body.Metadata.ResourceVersion; rv != "" && rv != cur {
			return true, nil, conflict(a, a.GetName())
		}
	}
	_, patched, err := v.apply(a)
	if err != nil {
		return true, nil, err
	}
	obj, err := v.stamp(a, patched)
	return true, obj, err
}

// current is the stored resourceVersion of the object a names.
func (v *versioned) current(a k8stesting.Action, name string) (string, error) {
	cur, err := v.tracker.Get(a.GetResource(), a.GetNamespace(), name)
	if err != nil {
		return "", err
	}
	m, err := meta.Accessor(cur)
	if err != nil {
		return "", err
	}
	return m.GetResourceVersion(), nil
}

// stamp stores obj with a new resourceVersion.
func (v *versioned) stamp(a k8stesting.Action, obj runtime.Object) (runtime.Object, error) {
	obj = obj.DeepCopyObject()
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, err
	}
	m.SetResourceVersion(v.next())
	if err := v.tracker.Update(a.GetResource(), obj, a.GetNamespace()); err != nil {
		return nil, err
	}
	return obj, nil
}

// conflict is the API server's answer to a stale resourceVersion.
func conflict(a k8stesting.Action, name string) error {
	return apierrors.NewConflict(a.GetResource().GroupResource(), name,
		errors.New("the object has been modified; please apply your changes to the latest version and try again"))
}
