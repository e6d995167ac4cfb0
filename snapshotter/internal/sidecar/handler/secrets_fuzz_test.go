package handler

import (
	"strings"
	"testing"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/stowage-csi/stowage/snapshotter/internal/snapapi"
)

// FuzzClassParameters reads a (group) snapshot class's parameters and a content's secret annotations the way
// csi-snapshotter does: no input panics it; the driver never gets a csi.storage.k8s.io/ key and gets every
// other key unchanged; a resolved secret is one the API server can hold, taken as written when the templates
// hold no token; the list secret never depends on the snapshot; a refusal names the parameter or annotation.
func FuzzClassParameters(f *testing.F) {
	f.Add("snap-secret", "kube-system", true, true, "driver-key", "v", "snapcontent-1", "snap", "default")
	f.Add("${volumesnapshotcontent.name}", "${volumesnapshot.namespace}", true, true, "csi.storage.k8s.io/snapshotter-secret-name", "x", "c", "snap", "default")
	f.Add("${volumesnapshot.name}", "ns", true, true, "csi.storage.k8s.io/unknown", "x", "c", "snap", "default")
	f.Add("s", "${volumesnapshot.name}", true, true, "k", "v", "c", "snap", "default")
	f.Add("s", "", true, false, "k", "v", "c", "snap", "default")
	f.Add("${", "$$", true, true, "k", "v", "c", "snap", "default")
	f.Fuzz(func(t *testing.T, nameT, nsT string, hasName, hasNS bool, extraKey, extraValue, contentName, snapName, snapNS string) {
		c := &snapv1.VolumeSnapshotContent{ObjectMeta: metav1.ObjectMeta{Name: contentName}}
		c.Spec.VolumeSnapshotRef = corev1.ObjectReference{Name: snapName, Namespace: snapNS}
		for _, keys := range []secretKeys{snapshotterSecret, snapshotterListSecret} {
			params := map[string]string{extraKey: extraValue}
			if hasName {
				params[keys.name] = nameT
			}
			if hasNS {
				params[keys.namespace] = nsT
			}
			checkStripped(t, params)
			withSnapshot := keys == snapshotterSecret
			ref, err := classSecretRef(keys, params, c, withSnapshot)
			if err != nil {
				if !strings.Contains(err.Error(), keys.name) && !strings.Contains(err.Error(), keys.namespace) {
					t.Fatalf("%q: %v: the error names neither parameter", params, err)
				}
				continue
			}
			if ref == nil {
				if params[keys.name] != "" || params[keys.namespace] != "" {
					t.Fatalf("%q resolved to no secret", params)
				}
				continue
			}
			if len(validation.IsDNS1123Subdomain(ref.Name)) > 0 || len(validation.IsDNS1123Label(ref.Namespace)) > 0 {
				t.Fatalf("%q resolved to the invalid secret %s/%s", params, ref.Namespace, ref.Name)
			}
			if !strings.Contains(nameT, "$") && ref.Name != nameT || !strings.Contains(nsT, "$") && ref.Namespace != nsT {
				t.Fatalf("templates without tokens %q, %q resolved to %s/%s", nsT, nameT, ref.Namespace, ref.Name)
			}
			if !withSnapshot && (strings.Contains(nameT+nsT, "${"+tokenSnapshotName+"}") || strings.Contains(nameT+nsT, "${"+tokenSnapshotNamspace+"}")) {
				t.Fatalf("list secret %q resolved with the snapshot's name or namespace", params)
			}
		}
		c.Annotations = map[string]string{snapapi.AnnDeletionSecretName: nameT, snapapi.AnnDeletionSecretNamespace: nsT}
		if !hasName {
			delete(c.Annotations, snapapi.AnnDeletionSecretName)
		}
		if !hasNS {
			delete(c.Annotations, snapapi.AnnDeletionSecretNamespace)
		}
		ref, err := annotationSecretRef(c)
		switch {
		case err != nil && !strings.Contains(err.Error(), snapapi.AnnDeletionSecretName):
			t.Fatalf("annotations %q: %v: the error names no annotation", c.Annotations, err)
		case err == nil && ref != nil && (ref.Name != nameT || ref.Namespace != nsT || nameT == "" || nsT == ""):
			t.Fatalf("annotations %q gave the secret %s/%s", c.Annotations, ref.Namespace, ref.Name)
		}
	})
}

// checkStripped checks the parameters csi-snapshotter hands the driver.
func checkStripped(t *testing.T, params map[string]string) {
	t.Helper()
	out, err := reservedStripped("volumesnapshotclass", "c", params)
	if err != nil {
		if !strings.Contains(err.Error(), snapapi.ParamPrefix) {
			t.Fatalf("reservedStripped(%q): %v: the error does not name the reserved key", params, err)
		}
		return
	}
	for k, v := range params {
		got, ok := out[k]
		if strings.HasPrefix(k, snapapi.ParamPrefix) == ok || ok && got != v {
			t.Fatalf("reservedStripped(%q) = %q", params, out)
		}
	}
	if len(out) > len(params) {
		t.Fatalf("reservedStripped(%q) = %q", params, out)
	}
}
