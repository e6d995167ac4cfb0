package snapshotcontroller

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	e2erig "github.com/stowage-csi/stowage/e2e/rig"
	"github.com/stowage-csi/stowage/e2e/tools"
)

// clientModule ships the CRDs in config/crd; deploy/crds copies them at the version snapshotter/go.mod pins.
const clientModule = "github.com/kubernetes-csi/external-snapshotter/client/v8"

// TestDeployedCRDsAreUpstreams checks that deploy/crds holds exactly the client module's snapshot and group
// snapshot CRDs, byte for byte, at the version the snapshotter
// module builds against, so what is deployed is what the binaries were built for.
func TestDeployedCRDsAreUpstreams(t *testing.T) {
	root, err := e2erig.RepoRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	gomod, err := os.ReadFile(filepath.Join(root, "snapshotter", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	version, err := tools.RequiredVersion(gomod, clientModule)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(context.Background(), "go", "mod", "download", "-json", clientModule+"@"+version)
	cmd.Dir = filepath.Join(root, "snapshotter")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go mod download %s@%s: %v", clientModule, version, err)
	}
	var mod struct{ Dir string }
	if err := json.Unmarshal(out, &mod); err != nil || mod.Dir == "" {
		t.Fatalf("go mod download %s@%s gave no directory (%v): %s", clientModule, version, err, out)
	}
	upstream := filepath.Join(mod.Dir, "config", "crd")
	deployed := filepath.Join(root, "deploy", "crds")
	want, got := names(t, upstream), names(t, deployed)
	if !slices.Equal(want, got) {
		t.Fatalf("deploy/crds holds %v, %s@%s config/crd holds %v", got, clientModule, version, want)
	}
	for _, name := range want {
		a, err := os.ReadFile(filepath.Join(upstream, name))
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(deployed, name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, b) {
			t.Errorf("deploy/crds/%s differs from %s@%s config/crd/%s; copy it again", name, clientModule, version, name)
		}
	}
}

func names(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	// Only the snapshot API's CRDs: deploy/crds also holds the S3 driver's CRD, and its kustomization lists
	// both (so it is not upstream's).
	var out []string
	for _, e := range entries {
		if !e.IsDir() && (strings.HasPrefix(e.Name(), "snapshot.storage.k8s.io_") || strings.HasPrefix(e.Name(), "groupsnapshot.storage.k8s.io_")) {
			out = append(out, e.Name())
		}
	}
	slices.Sort(out)
	return out
}
