package controller

import (
	"fmt"
	"os"
	"strings"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/stowage-csi/stowage/snapshotter/internal/snapapi"
)

// secretRef resolves the class's snapshotter secret (csi.storage.k8s.io/snapshotter-secret-name and
// -namespace), whose templates may use ${volumesnapshotcontent.name}, ${volumesnapshot.namespace} and, in the
// name only, ${volumesnapshot.name}. Nil when the class names no secret. The result is recorded on the content
// (deletion-secret annotations), so DeleteSnapshot still has it after the class is gone.
func secretRef(params map[string]string, contentName string, vs *snapv1.VolumeSnapshot) (*v1.SecretReference, error) {
	return resolveSecretRef(params, secretParams{snapapi.ParamSnapshotterSecretName, snapapi.ParamSnapshotterSecretNamespace,
		"snapshotter", "volumesnapshotcontent", "volumesnapshot"}, contentName, vs)
}

// secretParams are the class parameters that name a secret, and what the secret and its templates' variables are
// called for one kind of snapshot.
type secretParams struct {
	nameKey, namespaceKey string
	// what names the secret in errors ("snapshotter"); content and snapshot prefix the template variables
	// ("volumesnapshotcontent" for ${volumesnapshotcontent.name}, "volumesnapshot").
	what, content, snapshot string
}

// resolveSecretRef resolves the secret the parameters p names, with the templates' variables from the content
// name and the snapshot obj (its name only in the secret's name); nil when the class names no secret.
func resolveSecretRef(params map[string]string, p secretParams, contentName string, obj metav1.Object) (*v1.SecretReference, error) {
	nameT, hasName := params[p.nameKey]
	nsT, hasNS := params[p.namespaceKey]
	switch {
	case !hasName && !hasNS:
		return nil, nil
	case hasName != hasNS:
		return nil, fmt.Errorf("either name and namespace for %s secrets specified, Both must be specified", p.what)
	case nameT == "" || nsT == "":
		return nil, fmt.Errorf("%s secrets specified in parameters but value of either namespace or name is empty", p.what)
	}
	vars := map[string]string{p.content + ".name": contentName, p.snapshot + ".namespace": obj.GetNamespace()}
	ns, err := resolveTemplate(nsT, vars)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p.namespaceKey, err)
	}
	if len(validation.IsDNS1123Label(ns)) > 0 {
		return nil, fmt.Errorf("%s: %q resolved to %q which is not a valid namespace name", p.namespaceKey, nsT, ns)
	}
	vars[p.snapshot+".name"] = obj.GetName()
	name, err := resolveTemplate(nameT, vars)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p.nameKey, err)
	}
	if len(validation.IsDNS1123Subdomain(name)) > 0 {
		return nil, fmt.Errorf("%s: %q resolved to %q which is not a valid secret name", p.nameKey, nameT, name)
	}
	return &v1.SecretReference{Name: name, Namespace: ns}, nil
}

// resolveTemplate replaces each ${key} of t from params; an unknown key is an error, as upstream's.
func resolveTemplate(t string, params map[string]string) (string, error) {
	var missing []string
	out := os.Expand(t, func(k string) string {
		v, ok := params[k]
		if !ok {
			missing = append(missing, k)
		}
		return v
	})
	if len(missing) > 0 {
		return "", fmt.Errorf("invalid tokens: %q in %q", strings.Join(missing, ","), t)
	}
	return out, nil
}
