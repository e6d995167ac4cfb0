package provision

import (
	"errors"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// FuzzResolveSecret resolves a StorageClass's secret templates against a PVC, both written by users: no
// panic; a refusal is a ParamError naming the parameter; an accepted secret is one the API server can hold,
// taken as written when the template holds no ${...}; the namespace never comes from the PVC's name or
// annotations (a user could otherwise pick the namespace a secret is read from), and the name uses an
// annotation only as the template says.
func FuzzResolveSecret(f *testing.F) {
	f.Add("${pvc.name}-secret", "${pvc.namespace}", "data", "ns", "x")
	f.Add("${pvc.annotations['team']}", "kube-system", "data", "ns", "storage")
	f.Add("s", "${pvc.name}", "data", "ns", "x")
	f.Add("s", "${pvc.annotations['team']}", "data", "ns", "x")
	f.Add("${pv.name}", "${pv.name}", "data", "ns", "x")
	f.Add("${pvc.annotations['team']}", "ns", "data", "ns", "${pvc.name}")
	f.Add("${unknown", "ns}", "data", "ns", "x")
	f.Fuzz(func(t *testing.T, nameT, nsT, claimName, claimNS, annotation string) {
		params := map[string]string{
			"csi.storage.k8s.io/provisioner-secret-name": nameT, "csi.storage.k8s.io/provisioner-secret-namespace": nsT,
		}
		c, err := parseClassParams(params)
		if err != nil {
			var pe *ParamError
			if !errors.As(err, &pe) || params[pe.Key] != nameT && params[pe.Key] != nsT {
				t.Fatalf("parseClassParams(%q) = %v: not a ParamError naming a parameter", params, err)
			}
			return
		}
		claim := &v1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: claimName, Namespace: claimNS, Annotations: map[string]string{"team": annotation}}}
		for _, s := range c.secrets {
			if s == nil {
				continue // a kind the class names no secret for
			}
			ref, err := resolveSecret(s, "pvc-1", claim)
			if err != nil {
				var pe *ParamError
				if !errors.As(err, &pe) || pe.Key != s.nameKey && pe.Key != s.namespaceKey {
					t.Fatalf("resolveSecret(%+v) = %v: not a ParamError naming the template's parameter", s, err)
				}
				continue
			}
			if len(validation.IsDNS1123Subdomain(ref.name)) > 0 || len(validation.IsDNS1123Label(ref.namespace)) > 0 {
				t.Fatalf("resolveSecret(%+v) = %s/%s, not a valid secret", s, ref.namespace, ref.name)
			}
			if !strings.Contains(nameT, "${") && ref.name != nameT || !strings.Contains(nsT, "${") && ref.namespace != nsT {
				t.Fatalf("templates without variables %q, %q resolved to %s/%s", nsT, nameT, ref.namespace, ref.name)
			}
			if strings.Contains(nsT, "${pvc.name}") || strings.Contains(nsT, "${pvc.annotations[") {
				t.Fatalf("namespace template %q resolved to %q", nsT, ref.namespace)
			}
			if !strings.Contains(nameT, "pvc.annotations['team']") {
				other := claim.DeepCopy()
				other.Annotations["team"] = annotation + "-changed"
				if again, err := resolveSecret(s, "pvc-1", other); err != nil || *again != *ref {
					t.Fatalf("name template %q depends on the annotation: %s/%s, then %v, %v", nameT, ref.namespace, ref.name, again, err)
				}
			}
		}
	})
}
