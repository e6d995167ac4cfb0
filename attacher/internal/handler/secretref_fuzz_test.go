package handler

import (
	"strings"
	"testing"
)

// FuzzParseSecretRef reads the publish-secret annotation the attacher keeps on a VolumeAttachment (so a
// detach still finds the secret after the PV is gone), which whoever may edit the object could change: no
// panic; a refusal names the annotation; an accepted reference names a namespace and a name and is written
// back as the annotation it came from.
func FuzzParseSecretRef(f *testing.F) {
	for _, s := range []string{"kube-system/ebs-secret", "", "/", "ns/", "/name", "noslash", "a/b/c"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ref, err := parseSecretRef(s)
		if err != nil {
			if !strings.Contains(err.Error(), PublishSecretAnnotation) {
				t.Fatalf("parseSecretRef(%q) = %v: the error does not name the annotation", s, err)
			}
			return
		}
		if ref == nil {
			if s != "" {
				t.Fatalf("parseSecretRef(%q) = no secret", s)
			}
			return
		}
		if ref.Namespace == "" || ref.Name == "" || strings.Contains(ref.Namespace, "/") || formatSecretRef(ref) != s {
			t.Fatalf("parseSecretRef(%q) = %s/%s, written back as %q", s, ref.Namespace, ref.Name, formatSecretRef(ref))
		}
	})
}
