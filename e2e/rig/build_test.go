package rig

import (
	"os"
	"path/filepath"
	"testing"
)

func TestRepoRootFindsNearestGoWork(t *testing.T) {
	root := t.TempDir()
	nested := filepath.Join(root, "e2e", "cluster", "deep")
	if err := os.MkdirAll(nested, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "go.work"), []byte("go 1.26.0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{root, nested, filepath.Join(root, "e2e")} {
		got, err := RepoRoot(dir)
		if err != nil {
			t.Fatalf("RepoRoot(%s): %v", dir, err)
		}
		if got != root {
			t.Errorf("RepoRoot(%s) = %s, want %s", dir, got, root)
		}
	}
}

func TestRepoRootFailsOutsideRepository(t *testing.T) {
	// The system temp dir has no go.work above it.
	dir := t.TempDir()
	if got, err := RepoRoot(dir); err == nil {
		t.Fatalf("RepoRoot(%s) = %s, want an error", dir, got)
	}
}
