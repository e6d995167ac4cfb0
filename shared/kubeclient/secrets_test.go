package kubeclient

import (
	"context"
	"maps"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func TestCSISecrets(t *testing.T) {
	kube := fake.NewClientset(&v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "creds"},
		Data: map[string][]byte{"user": []byte("u"), "key": []byte("k")}})
	ctx := context.Background()
	got, err := CSISecrets(ctx, kube, &v1.SecretReference{Namespace: "ns", Name: "creds"})
	if err != nil || !maps.Equal(got, map[string]string{"user": "u", "key": "k"}) {
		t.Errorf("CSISecrets = %v, %v; want the Secret's data as strings", got, err)
	}
	if got, err := CSISecrets(ctx, kube, nil); got != nil || err != nil {
		t.Errorf("nil ref: %v, %v; want nil, nil", got, err)
	}
	if _, err := CSISecrets(ctx, kube, &v1.SecretReference{Namespace: "ns", Name: "missing"}); err == nil || !strings.Contains(err.Error(), "secret ns/missing") {
		t.Errorf("missing Secret: %v, want an error naming secret ns/missing", err)
	}
	actions := kube.Actions()
	for _, a := range actions {
		if a.GetVerb() != "get" {
			t.Errorf("action %s %s, want only gets", a.GetVerb(), a.GetResource().Resource)
		}
	}
	if len(actions) != 2 {
		t.Errorf("%d API calls, want 2 (none for a nil ref)", len(actions))
	}
}
