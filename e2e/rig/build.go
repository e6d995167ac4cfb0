package rig

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
)

// VersionFlag stamps binaries built for tests with the version "e2e".
const VersionFlag = "-X github.com/stowage-csi/stowage/shared/version.Version=e2e"

// BuildCommand builds the command ./cmd/<name> of the repository module in <root>/<module> into
// <dir>/<name> and returns that path. The binary is static (CGO off) and carries no local file paths;
// the Go build cache makes a repeated build cheap. tags are build tags, for a command that only benchmarks
// build.
func BuildCommand(ctx context.Context, root, module, name, dir string, tags ...string) (string, error) {
	bin := filepath.Join(dir, name)
	args := []string{"build", "-trimpath", "-o", bin, "-ldflags", VersionFlag}
	if len(tags) > 0 {
		args = append(args, "-tags", strings.Join(tags, ","))
	}
	cmd := exec.CommandContext(ctx, "go", append(args, "./cmd/"+name)...)
	cmd.Dir = filepath.Join(root, module)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	// A test binary that dies (a -timeout panic) takes the build with it rather than leave it running.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s in %s: %w\n%s", name, cmd.Dir, err, out)
	}
	return bin, nil
}

// RepoRoot walks up from dir to the first folder holding go.work: the Stowage repository root.
func RepoRoot(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("resolve %s: %w", dir, err)
	}
	for d := abs; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.work")); err == nil {
			return d, nil
		} else if !errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("look for go.work in %s: %w", d, err)
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no go.work in %s or any parent: run inside the Stowage repository", abs)
		}
	}
}
