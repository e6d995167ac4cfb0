package handler

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/stowage-csi/stowage/shared/kubeclient"
	"github.com/stowage-csi/stowage/snapshotter/internal/snapapi"
)

// Template tokens a class's secret parameters may use, upstream's (pkg/utils/util.go).
const (
	tokenContentName      = "volumesnapshotcontent.name"
	tokenSnapshotName     = "volumesnapshot.name"
	tokenSnapshotNamspace = "volumesnapshot.namespace"
)

// secretKeys are a pair of class parameters naming a Secret.
type secretKeys struct{ name, namespace string }

var (
	snapshotterSecret     = secretKeys{snapapi.ParamSnapshotterSecretName, snapapi.ParamSnapshotterSecretNamespace}
	snapshotterListSecret = secretKeys{snapapi.ParamSnapshotterListSecretName, snapapi.ParamSnapshotterListSecretNamespace}
)

// annotationSecretRef is the secret the snapshot controller recorded on the content for CreateSnapshot and
// DeleteSnapshot (so deletion still has it when the class is gone); nil when the content has none.
func annotationSecretRef(c *snapv1.VolumeSnapshotContent) (*corev1.SecretReference, error) {
	name, hasName := c.Annotations[snapapi.AnnDeletionSecretName]
	ns, hasNS := c.Annotations[snapapi.AnnDeletionSecretNamespace]
	if !hasName || !hasNS {
		return nil, nil
	}
	if name == "" || ns == "" {
		return nil, fmt.Errorf("volumesnapshotcontent %s: annotations %s and %s must both name the secret, got %q and %q",
			c.Name, snapapi.AnnDeletionSecretName, snapapi.AnnDeletionSecretNamespace, name, ns)
	}
	return &corev1.SecretReference{Name: name, Namespace: ns}, nil
}

// classSecretRef resolves the Secret the class's parameters keys name for content c, with upstream's
// templates: the name may use the content's name and its VolumeSnapshot's name and namespace, the namespace
// the content's name and the snapshot's namespace (withSnapshot false leaves the snapshot's out, as upstream
// does for the list secret). Nil when the class names none.
func classSecretRef(keys secretKeys, params map[string]string, c *snapv1.VolumeSnapshotContent, withSnapshot bool) (*corev1.SecretReference, error) {
	nameTmpl, hasName := params[keys.name]
	nsTmpl, hasNS := params[keys.namespace]
	if !hasName && !hasNS {
		return nil, nil
	}
	if !hasName || !hasNS {
		return nil, fmt.Errorf("volumesnapshotclass %s: parameters %s and %s must be set together", className(c), keys.name, keys.namespace)
	}
	nsParams := map[string]string{tokenContentName: c.Name}
	nameParams := map[string]string{tokenContentName: c.Name}
	if withSnapshot {
		nsParams[tokenSnapshotNamspace] = c.Spec.VolumeSnapshotRef.Namespace
		nameParams[tokenSnapshotNamspace] = c.Spec.VolumeSnapshotRef.Namespace
		nameParams[tokenSnapshotName] = c.Spec.VolumeSnapshotRef.Name
	}
	ns, err := resolveTemplate(keys.namespace, nsTmpl, nsParams)
	if err != nil {
		return nil, err
	}
	if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
		return nil, fmt.Errorf("parameter %s: %q resolves to %q, not a valid namespace name: %s", keys.namespace, nsTmpl, ns, strings.Join(errs, "; "))
	}
	name, err := resolveTemplate(keys.name, nameTmpl, nameParams)
	if err != nil {
		return nil, err
	}
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return nil, fmt.Errorf("parameter %s: %q resolves to %q, not a valid secret name: %s", keys.name, nameTmpl, name, strings.Join(errs, "; "))
	}
	return &corev1.SecretReference{Name: name, Namespace: ns}, nil
}

// resolveTemplate expands ${token}s from params; a token params lacks is an error naming the parameter.
func resolveTemplate(key, tmpl string, params map[string]string) (string, error) {
	var missing []string
	out := os.Expand(tmpl, func(k string) string {
		v, ok := params[k]
		if !ok {
			missing = append(missing, k)
		}
		return v
	})
	if len(missing) > 0 {
		slices.Sort(missing)
		return "", fmt.Errorf("parameter %s: %q uses tokens %v that are not allowed here", key, tmpl, missing)
	}
	return out, nil
}

// credentials reads the Secret ref names (a direct GET: upstream's RBAC grants no Secret watch); nil ref
// means no secrets.
func (h *Handler) credentials(ctx context.Context, ref *corev1.SecretReference) (map[string]string, error) {
	out, err := kubeclient.CSISecrets(ctx, h.cfg.Kube, ref)
	if err != nil {
		return nil, fmt.Errorf("reading %w", err)
	}
	return out, nil
}

func secretRef(namespace, name string) *corev1.SecretReference {
	return &corev1.SecretReference{Namespace: namespace, Name: name}
}
