package images

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"

	"github.com/stowage-csi/stowage/e2e/rig"
	"github.com/stowage-csi/stowage/e2e/tools"
)

// BuildBinaries builds, as `make build` does, every command of the modules whose images are named (every
// image of images.tsv if none is) into dir, which Assemble then takes as its BinDir. The binaries are static
// and stamped with the e2e version.
func BuildBinaries(ctx context.Context, repoRoot, dir string, names ...string) error {
	table, err := ReadImageTable(filepath.Join(repoRoot, "deploy", "images", "images.tsv"))
	if err != nil {
		return err
	}
	var modules []string
	for _, e := range table {
		if (len(names) == 0 || slices.Contains(names, e.Image)) && !slices.Contains(modules, e.Module) {
			modules = append(modules, e.Module)
		}
	}
	for _, m := range modules {
		cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", rig.VersionFlag,
			"-o", dir+string(filepath.Separator), "./cmd/...")
		cmd.Dir = filepath.Join(repoRoot, m)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go build ./cmd/... in %s: %w\n%s", m, err, out)
		}
	}
	return nil
}

// Stowage builds every Stowage binary into binDir and assembles the images of deploy/images/images.tsv from
// them under tag, as the charts name them; it returns the archives' paths, for a node to import.
func Stowage(ctx context.Context, repoRoot, binDir, tag string) ([]string, error) {
	if err := BuildBinaries(ctx, repoRoot, binDir); err != nil {
		return nil, err
	}
	archives, err := Assemble(ctx, Options{RepoRoot: repoRoot, BinDir: binDir, CacheDir: tools.CacheDir(repoRoot), Tag: tag})
	if err != nil {
		return nil, err
	}
	paths := make([]string, 0, len(archives))
	for _, a := range archives {
		paths = append(paths, a.Path)
	}
	return paths, nil
}
