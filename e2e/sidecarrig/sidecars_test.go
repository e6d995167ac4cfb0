package sidecarrig

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	k8syaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/stowage-csi/stowage/e2e/rig"
)

// TestSidecarsNameTheirCommandAndServiceAccount checks each sidecar against the repository: its command is
// there to build, and its deploy/rbac file creates its ServiceAccount in Namespace, so the kubeconfig the rig
// writes is of the account the file's bindings grant.
func TestSidecarsNameTheirCommandAndServiceAccount(t *testing.T) {
	root, err := rig.RepoRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []Sidecar{Attacher(), Provisioner(), Resizer(), CSISnapshotter(), SnapshotController()} {
		t.Run(s.Command, func(t *testing.T) {
			if _, err := os.Stat(filepath.Join(root, s.Module, "cmd", s.Command, "main.go")); err != nil {
				t.Errorf("command: %v", err)
			}
			data, err := os.ReadFile(filepath.Join(root, "deploy", "rbac", s.RBAC))
			if err != nil {
				t.Fatal(err)
			}
			if !createsServiceAccount(t, data, s.ServiceAccount) {
				t.Errorf("deploy/rbac/%s creates no ServiceAccount %s/%s", s.RBAC, Namespace, s.ServiceAccount)
			}
			if want := "system:serviceaccount:" + Namespace + ":" + s.ServiceAccount; s.User() != want {
				t.Errorf("User() = %q, want %q", s.User(), want)
			}
		})
	}
}

// createsServiceAccount reports whether the manifests in data include the ServiceAccount Namespace/name.
func createsServiceAccount(t *testing.T, data []byte, name string) bool {
	t.Helper()
	decoder := k8syaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		var obj struct {
			Kind     string
			Metadata struct{ Name, Namespace string }
		}
		if err := decoder.Decode(&obj); errors.Is(err, io.EOF) {
			return false
		} else if err != nil {
			t.Fatal(err)
		}
		if obj.Kind == "ServiceAccount" && obj.Metadata.Name == name && obj.Metadata.Namespace == Namespace {
			return true
		}
	}
}
