package tools

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stowage-csi/stowage/e2e/rig"
)

// TestGinkgoMatchesKubernetesPin checks that the Ginkgo command line is the version e2e.test is compiled
// with: the command line and the suite's processes speak a protocol of their version, and Ginkgo refuses or
// misreads a suite of another.
func TestGinkgoMatchesKubernetesPin(t *testing.T) {
	root, err := rig.RepoRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	cli, err := Version(root, Ginkgo())
	if err != nil {
		t.Fatal(err)
	}
	kube, err := os.ReadFile(filepath.Join(root, "e2e", "tools", Kube().Dir, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	suite, err := RequiredVersion(kube, Ginkgo().Requires)
	if err != nil {
		t.Fatal(err)
	}
	if cli != suite {
		t.Errorf("e2e/tools/ginkgo pins %s %s, but e2e.test is built with %s", Ginkgo().Requires, cli, suite)
	}
}
