package controller

import (
	"reflect"
	"strings"
	"testing"

	groupv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/stowage-csi/stowage/snapshotter/internal/snapapi"
)

// FuzzClassSecretRef resolves a VolumeSnapshotClass's and a VolumeGroupSnapshotClass's secret parameters,
// which any class author writes: no template may panic the controller; what is accepted is a Secret the API
// server can hold, and is what it would be recorded as on the content; a refusal says which secret; a
// template without tokens is taken as written; the namespace never depends on the snapshot's name (the name
// of a user's object must not pick the namespace a secret is read from).
func FuzzClassSecretRef(f *testing.F) {
	f.Add("snap-secret", "kube-system", true, true, "snapcontent-1", "snap", "default")
	f.Add("${volumesnapshotcontent.name}", "${volumesnapshot.namespace}", true, true, "snapcontent-1", "snap", "default")
	f.Add("${volumesnapshot.name}-key", "ns", true, true, "c", "snap", "default")
	f.Add("${volumegroupsnapshot.name}", "${volumegroupsnapshot.namespace}", true, true, "c", "g", "default")
	f.Add("s", "${volumesnapshot.name}", true, true, "c", "snap", "default")
	f.Add("s", "", true, true, "c", "snap", "default")
	f.Add("s", "ns", true, false, "c", "snap", "default")
	f.Add("${unknown}", "${", true, true, "c", "snap", "default")
	f.Add("$volumesnapshot.name", "$$", true, true, "c", "snap", "default")
	f.Fuzz(func(t *testing.T, nameT, nsT string, hasName, hasNS bool, contentName, objName, objNS string) {
		for _, tc := range []struct {
			nameKey, nsKey, nameToken string
			resolve                   func(map[string]string) (*v1.SecretReference, error)
		}{
			{snapapi.ParamSnapshotterSecretName, snapapi.ParamSnapshotterSecretNamespace, "${volumesnapshot.name}",
				func(p map[string]string) (*v1.SecretReference, error) {
					return secretRef(p, contentName, &snapv1.VolumeSnapshot{ObjectMeta: metav1.ObjectMeta{Name: objName, Namespace: objNS}})
				}},
			{snapapi.ParamGroupSnapshotterSecretName, snapapi.ParamGroupSnapshotterSecretNamespace, "${volumegroupsnapshot.name}",
				func(p map[string]string) (*v1.SecretReference, error) {
					return groupSecretRef(p, contentName, &groupv1.VolumeGroupSnapshot{ObjectMeta: metav1.ObjectMeta{Name: objName, Namespace: objNS}})
				}},
		} {
			params := map[string]string{"unrelated": "x"}
			if hasName {
				params[tc.nameKey] = nameT
			}
			if hasNS {
				params[tc.nsKey] = nsT
			}
			ref, err := tc.resolve(params)
			if err != nil {
				if !strings.Contains(err.Error(), "secret") {
					t.Fatalf("%s=%q, %s=%q: %v: the error does not say it is about the secret", tc.nameKey, nameT, tc.nsKey, nsT, err)
				}
				continue
			}
			if ref == nil {
				if hasName || hasNS {
					t.Fatalf("%s=%q, %s=%q resolved to no secret", tc.nameKey, nameT, tc.nsKey, nsT)
				}
				continue
			}
			if len(validation.IsDNS1123Subdomain(ref.Name)) > 0 || len(validation.IsDNS1123Label(ref.Namespace)) > 0 {
				t.Fatalf("%s=%q, %s=%q resolved to the invalid secret %s/%s", tc.nameKey, nameT, tc.nsKey, nsT, ref.Namespace, ref.Name)
			}
			if !strings.Contains(nameT, "$") && ref.Name != nameT || !strings.Contains(nsT, "$") && ref.Namespace != nsT {
				t.Fatalf("templates without tokens %q, %q resolved to %s/%s", nsT, nameT, ref.Namespace, ref.Name)
			}
			if strings.Contains(nsT, tc.nameToken) {
				t.Fatalf("namespace template %q with %s was accepted", nsT, tc.nameToken)
			}
			if again, err := tc.resolve(params); err != nil || !reflect.DeepEqual(again, ref) {
				t.Fatalf("resolving twice gave %v, %v, then %v, %v", ref, nil, again, err)
			}
		}
	})
}
