package rig

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWorkdirPreparesTheGivenFolderAndLeavesItToItsOwner(t *testing.T) {
	dir := t.TempDir()
	got, created, err := Workdir(dir, "stowage-test-")
	if err != nil {
		t.Fatal(err)
	}
	if got != dir || created {
		t.Errorf("Workdir(%s) = %s, created %v; want the folder itself, not created", dir, got, created)
	}
	for _, d := range []string{"logs", "bin", "sock"} {
		if fi, err := os.Stat(filepath.Join(dir, d)); err != nil || !fi.IsDir() {
			t.Errorf("%s: %v, want a folder", d, err)
		}
	}
}

func TestWorkdirMakesATemporaryFolderWhenNoneIsGiven(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	got, created, err := Workdir("", "stowage-test-")
	if err != nil {
		t.Fatal(err)
	}
	if !created || !strings.HasPrefix(filepath.Base(got), "stowage-test-") {
		t.Errorf("Workdir = %s, created %v; want a new stowage-test-* folder", got, created)
	}
	if _, err := os.Stat(filepath.Join(got, "sock")); err != nil {
		t.Errorf("sock: %v", err)
	}
}

func TestWorkdirFailsOverAFileAndKeepsTheGivenFolder(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	// A file where a folder must go fails the preparation whatever the user's rights.
	blocked := filepath.Join(tmp, "given")
	if err := os.MkdirAll(blocked, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(blocked, "bin"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Workdir(blocked, "stowage-test-"); err == nil {
		t.Fatal("Workdir over a file named bin succeeded")
	}
	if _, err := os.Stat(blocked); err != nil {
		t.Errorf("the given folder was removed: %v", err)
	}
}

func TestWorkingRepoRootFindsTheWorkspace(t *testing.T) {
	root, err := WorkingRepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.work")); err != nil {
		t.Errorf("WorkingRepoRoot = %s without go.work: %v", root, err)
	}
}
