package provision

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// templateVar matches ${...} in a secret name or namespace.
var templateVar = regexp.MustCompile(`\$\{([^}]*)\}`)

// annotationVar matches pvc.annotations['key'] inside ${...}.
var annotationVar = regexp.MustCompile(`^pvc\.annotations\['([^']+)'\]$`)

// secretRef is a resolved secret reference.
type secretRef struct{ name, namespace string }

// resolveSecret substitutes the templates of t. Namespaces may use ${pv.name} and ${pvc.namespace}; names may also
// use ${pvc.name} and ${pvc.annotations['key']}, as upstream allows. The results must be valid object names.
func resolveSecret(t *secretTemplate, pvName string, claim *v1.PersistentVolumeClaim) (*secretRef, error) {
	if t == nil {
		return nil, nil
	}
	ns, err := expand(t.namespace, t.namespaceKey, pvName, claim, false)
	if err != nil {
		return nil, err
	}
	name, err := expand(t.name, t.nameKey, pvName, claim, true)
	if err != nil {
		return nil, err
	}
	if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
		return nil, &ParamError{Key: t.namespaceKey, Msg: fmt.Sprintf("resolves to %q, not a valid namespace: %s", ns, strings.Join(errs, "; "))}
	}
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return nil, &ParamError{Key: t.nameKey, Msg: fmt.Sprintf("resolves to %q, not a valid secret name: %s", name, strings.Join(errs, "; "))}
	}
	return &secretRef{name: name, namespace: ns}, nil
}

func expand(tmpl, key, pvName string, claim *v1.PersistentVolumeClaim, isName bool) (string, error) {
	var bad error
	out := templateVar.ReplaceAllStringFunc(tmpl, func(m string) string {
		v := m[2 : len(m)-1]
		switch {
		case v == "pv.name":
			return pvName
		case v == "pvc.namespace" && claim != nil:
			return claim.Namespace
		case v == "pvc.name" && isName && claim != nil:
			return claim.Name
		}
		if a := annotationVar.FindStringSubmatch(v); a != nil && isName && claim != nil {
			return claim.Annotations[a[1]]
		}
		if bad == nil {
			bad = &ParamError{Key: key, Msg: fmt.Sprintf("template %s is not allowed here", m)}
		}
		return ""
	})
	return out, bad
}

// secretGetter reads one Secret; the provisioner GETs only the secret a call needs, as upstream does, instead of
// caching every Secret in the cluster.
type secretGetter interface {
	GetSecret(ctx context.Context, namespace, name string) (*v1.Secret, error)
}

// secretData fetches ref's data as the string map CSI wants; nil ref means no secret.
func secretData(ctx context.Context, g secretGetter, ref *secretRef) (map[string]string, error) {
	if ref == nil {
		return nil, nil
	}
	s, err := g.GetSecret(ctx, ref.namespace, ref.name)
	if err != nil {
		return nil, fmt.Errorf("get secret %s/%s: %w", ref.namespace, ref.name, err)
	}
	out := make(map[string]string, len(s.Data))
	for k, v := range s.Data {
		out[k] = string(v)
	}
	return out, nil
}
