package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
)

// gitRepo makes a repository in a temporary folder with files (path -> content) committed.
func gitRepo(t *testing.T, files map[string][]byte) string {
	t.Helper()
	root := t.TempDir()
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", root, "-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	git("init", "-q")
	for p, data := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git("add", "-A")
	git("commit", "-q", "-m", "files")
	return root
}

func paths(fs []Finding) []string {
	var out []string
	for _, f := range fs {
		out = append(out, f.Path)
	}
	slices.Sort(out)
	return out
}

func TestCheckFindsBinariesAndLargeFiles(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("git is needed to list tracked files:", err)
	}
	elf := append([]byte("\x7fELF\x02\x01\x01"), make([]byte, 100)...)
	root := gitRepo(t, map[string][]byte{
		"README.md":                     []byte("# ok\n"),
		"go.sum":                        make([]byte, MaxSize), // exactly the limit is allowed
		"tiny":                          []byte("\x7f"),        // shorter than the magic
		"ebs-plugin/cmd/ebs-plugin/bin": elf,
		"testdata/big.img":              make([]byte, MaxSize+1),
	})
	got, err := Check(context.Background(), root)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"ebs-plugin/cmd/ebs-plugin/bin", "testdata/big.img"}
	if !slices.Equal(paths(got), want) {
		t.Fatalf("Check() = %v, want findings for %v", got, want)
	}
}

func TestCheckSkipsDeletedFiles(t *testing.T) {
	root := gitRepo(t, map[string][]byte{"a.out": []byte("\x7fELF....")})
	if err := os.Remove(filepath.Join(root, "a.out")); err != nil {
		t.Fatal(err)
	}
	got, err := Check(context.Background(), root)
	if err != nil || len(got) != 0 {
		t.Fatalf("Check() after deleting the binary = %v, %v; want no findings", got, err)
	}
}

// TestRepositoryIsClean runs the check on this repository itself, so `make test` catches a committed binary
// even where `make lint` was not run.
func TestRepositoryIsClean(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.work")); err != nil {
		t.Fatalf("%s is not the repository root: %v", root, err)
	}
	got, err := Check(context.Background(), root)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range got {
		t.Errorf("tracked file must not be: %s", f)
	}
}
