package sidecarrig

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stowage-csi/stowage/e2e/rig"
	"github.com/stowage-csi/stowage/e2e/tools"
)

// upstreamBuildTimeout covers a first build of an upstream peer on a fresh machine (over six minutes on 2
// cores), under the cache's lock, which another test binary may hold for its own build.
const upstreamBuildTimeout = 30 * time.Minute

// binDir is where Main builds this test binary's sidecars. It is named by the process, not kept in a
// variable, so Binary finds it without state shared between Main and the tests.
func binDir() string {
	return filepath.Join(os.TempDir(), fmt.Sprintf("stowage-sidecars-%d", os.Getpid()))
}

// Main is a TestMain body: it builds each sidecar once for all the tests of the binary (with the version stamp
// "e2e"), runs them and removes the builds. A failed build ends the run with status 1 and the reason on stderr.
func Main(m *testing.M, sidecars ...Sidecar) int {
	dir := binDir()
	defer os.RemoveAll(dir)
	if err := build(dir, sidecars); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

func build(dir string, sidecars []Sidecar) error {
	root, err := rig.RepoRoot(".")
	if err != nil {
		return err
	}
	for _, s := range sidecars {
		out := filepath.Join(dir, s.Module)
		if err := os.MkdirAll(out, 0o755); err != nil {
			return err
		}
		if _, err := rig.BuildCommand(context.Background(), root, s.Module, s.Command, out); err != nil {
			return err
		}
	}
	return nil
}

// Binary is the path of Stowage's build of s; the package's TestMain must have built it with Main.
func Binary(t testing.TB, s Sidecar) string {
	t.Helper()
	path := filepath.Join(binDir(), s.Module, s.Command)
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("%s was not built: call sidecarrig.Main with it from TestMain (%v)", s.Command, err)
	}
	return path
}

// Upstream is the path of upstream's peer of s, built from e2e/tools or taken from the cache. Tests call it
// before their scenario's clock starts: a first build takes minutes.
func Upstream(t testing.TB, s Sidecar) string {
	t.Helper()
	if s.upstream == nil {
		t.Fatalf("no upstream peer of %s builds in e2e/tools", s.Command)
	}
	ctx, cancel := context.WithTimeout(context.Background(), upstreamBuildTimeout)
	defer cancel()
	path, err := tools.Binary(ctx, s.upstream(), s.Command)
	if err != nil {
		t.Fatalf("build upstream's %s: %v", s.Command, err)
	}
	return path
}
