package deploycheck

import (
	"os"
	"path/filepath"
	"testing"
)

// TestRenderedContainersCurrent: e2e/rendered/containers.json, from which the e2e stacks and the demo take
// every binary's args and env, is what the charts render now. DEPLOYCHECK_UPDATE=1 writes it again.
func TestRenderedContainersCurrent(t *testing.T) {
	want, err := RenderedContainers(repoRoot, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(repoRoot, ContainersFile)
	if os.Getenv("DEPLOYCHECK_UPDATE") == "1" {
		if err := os.WriteFile(path, want, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Errorf("%s is stale: the charts render other containers now (GOWORK=off DEPLOYCHECK_UPDATE=1 go test -run TestRenderedContainersCurrent in deploy/deploycheck writes it again)", ContainersFile)
	}
}
