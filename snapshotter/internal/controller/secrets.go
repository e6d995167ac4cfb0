package controller

import (
	"fmt"
	"os"
	"strings"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/stowage-csi/stowage/snapshotter/internal/snapapi"
)

// secretRef resolves the class's snapshotter secret (csi.storage.k8s.io/snapshotter-secret-name and
// -namespace), whose templates may use ${volumesnapshotcontent.name}, ${volumesnapshot.namespace} and, in the
// name only, ${volumesnapshot.name}. Nil when the class names no secret. The result is recorded on the content
// (deletion-secret annotations), so DeleteSnapshot still has it after the class is gone.
func secretRef(params map[string]string, contentName string, vs *snapv1.VolumeSnapshot) (*v1.SecretReference, error) {
	nameT, hasName := params[snapapi.ParamSnapshotterSecretName]
	nsT, hasNS := params[snapapi.ParamSnapshotterSecretNamespace]
	switch {
	case !hasName && !hasNS:
		return nil, nil
	case hasName != hasNS:
		return nil, fmt.Errorf("either name and namespace for snapshotter secrets specified, Both must be specified")
	case nameT == "" || nsT == "":
		return nil, fmt.Errorf("snapshotter secrets specified in parameters but value of either namespace or name is empty")
	}
	ns, err := resolveTemplate(nsT, map[string]string{
		"volumesnapshotcontent.name": contentName, "volumesnapshot.namespace": vs.Namespace,
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", snapapi.ParamSnapshotterSecretNamespace, err)
	}
	if len(validation.IsDNS1123Label(ns)) > 0 {
		return nil, fmt.Errorf("%s: %q resolved to %q which is not a valid namespace name", snapapi.ParamSnapshotterSecretNamespace, nsT, ns)
	}
	name, err := resolveTemplate(nameT, map[string]string{
		"volumesnapshotcontent.name": contentName, "volumesnapshot.namespace": vs.Namespace, "volumesnapshot.name": vs.Name,
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", snapapi.ParamSnapshotterSecretName, err)
	}
	if len(validation.IsDNS1123Subdomain(name)) > 0 {
		return nil, fmt.Errorf("%s: %q resolved to %q which is not a valid secret name", snapapi.ParamSnapshotterSecretName, nameT, name)
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
