package images

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stowage-csi/stowage/e2e/rig"
)

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := rig.RepoRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

func readRepoDockerfile(t *testing.T) *Dockerfile {
	t.Helper()
	d, err := ReadDockerfile(filepath.Join(repoRoot(t), "deploy", "images", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// standInBinDir writes a small executable for every binary the Dockerfile's images copy, so the images can
// be assembled without `make build`. Each holds its own name, so the images differ as the real ones do.
func standInBinDir(t *testing.T) string {
	t.Helper()
	root := repoRoot(t)
	table, err := ReadImageTable(filepath.Join(root, "deploy", "images", "images.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	d := readRepoDockerfile(t)
	dir := t.TempDir()
	for _, e := range table {
		s, err := d.Spec(e.Image)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range s.Copies {
			if err := os.WriteFile(filepath.Join(dir, c.Bin), []byte("#!/bin/sh\necho "+c.Bin+"\n"), 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	return dir
}

// assembleStandIns assembles the named images (all if none) from stand-in binaries into cacheDir.
func assembleStandIns(t *testing.T, cacheDir, binDir string, names ...string) []Archive {
	t.Helper()
	as, err := Assemble(context.Background(), Options{
		RepoRoot: repoRoot(t), BinDir: binDir, CacheDir: cacheDir, Tag: "test", Images: names,
	})
	if err != nil {
		t.Fatal(err)
	}
	return as
}

func archiveNamed(t *testing.T, as []Archive, image string) Archive {
	t.Helper()
	for _, a := range as {
		if a.Image == image {
			return a
		}
	}
	t.Fatalf("no archive of %s among %d", image, len(as))
	return Archive{}
}
