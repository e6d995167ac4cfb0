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
	tracker := c.Tracker()
	apply := k8stesting.ObjectReaction(tracker)
	var mu sync.Mutex
	version := 0
	next := func() string {
		version++
		return strconv.Itoa(version)
	}
	for _, o := range objects {
		o = o.DeepCopyObject()
		if m, err := meta.Accessor(o); err == nil {
			m.SetResourceVersion(next())
		}
		if err := tracker.Add(o); err != nil {
			panic(err) // seed objects are test input; a bad one is a bug in the test
		}
	}

	conflict := func(a k8stesting.Action, name string) error {
		return apierrors.NewConflict(a.GetResource().GroupResource(), name,
			errors.New("the object has been modified; please apply your changes to the latest version and try again"))
	}
	currentVersion := func(a k8stesting.Action, name string) (string, error) {
		cur, err := tracker.Get(a.GetResource(), a.GetNamespace(), name)
		if err != nil {
			return "", err
		}
		m, err := meta.Accessor(cur)
		if err != nil {
			return "", err
		}
		return m.GetResourceVersion(), nil
	}
	// stamp gives a stored object a new resourceVersion.
	stamp := func(a k8stesting.Action, obj runtime.Object) (runtime.Object, error) {
		obj = obj.DeepCopyObject()
		m, err := meta.Accessor(obj)
		if err != nil {
			return nil, err
		}
		m.SetResourceVersion(next())
		if err := tracker.Update(a.GetResource(), obj, a.GetNamespace()); err != nil {
			return nil, err
		}
		return obj, nil
	}

	c.PrependReactor("*", "*", func(action k8stesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		// Switch on the verb: UpdateAction has CreateAction's method set, so a type switch cannot tell them apart.
		switch action.GetVerb() {
		case "create":
			a, ok := action.(k8stesting.CreateAction)
			if !ok {
				return false, nil, nil
			}
			obj := a.GetObject().DeepCopyObject()
			m, err := meta.Accessor(obj)
			if err != nil {
				return false, nil, nil
			}
			m.SetResourceVersion(next())
			if err := tracker.Create(a.GetResource(), obj, a.GetNamespace()); err != nil {
				return true, nil, err
			}
			return true, obj, nil
		case "update":
			a, ok := action.(k8stesting.UpdateAction)
			if !ok {
				return false, nil, nil
			}
			m, err := meta.Accessor(a.GetObject())
			if err != nil {
				return false, nil, nil
			}
			cur, err := currentVersion(a, m.GetName())
			if err != nil {
				return true, nil, err
			}
			if rv := m.GetResourceVersion(); rv != "" && rv != cur {
				return true, nil, conflict(a, m.GetName())
			}
			obj, err := stamp(a, a.GetObject())
			return true, obj, err
		case "patch":
			a, ok := action.(k8stesting.PatchAction)
			if !ok {
				return false, nil, nil
			}
			cur, err := currentVersion(a, a.GetName())
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
			_, patched, err := apply(a)
			if err != nil {
				return true, nil, err
			}
			obj, err := stamp(a, patched)
			return true, obj, err
		}
		return false, nil, nil
	})
	return c
}
