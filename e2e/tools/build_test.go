package tools

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/mod/semver"

	"github.com/stowage-csi/stowage/e2e/rig"
)

// TestModulesPinReleasesAndImportTheirBinaries checks each tool module requires a release of the
// project (the version names the cache folder, and the figures say which release they compare with), has a
// go.sum (a reproducible build), and imports every package it builds (so `go mod tidy` keeps them).
func TestModulesPinReleasesAndImportTheirBinaries(t *testing.T) {
	root, err := rig.RepoRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []Module{Etcd(), Kube(), KubeScheduler(), Kubelet(), Containerd(), CNIPlugins(), Helm(), Versitygw(), CSIAttacher(),
		CSIProvisioner(), ExternalSnapshotter(), Rclone(), Ginkgo()} {
		v, err := Version(root, m)
		if err != nil {
			t.Errorf("%s: %v", m.Name, err)
			continue
		}
		if !semver.IsValid(v) || semver.Prerelease(v) != "" {
			t.Errorf("%s pins %s %s, want a release", m.Dir, m.Requires, v)
		}
		dir := filepath.Join(root, "e2e", "tools", m.Dir)
		if _, err := os.Stat(filepath.Join(dir, "go.sum")); err != nil {
			t.Errorf("%s has no go.sum: %v", m.Dir, err)
		}
		src, err := os.ReadFile(filepath.Join(dir, "tools.go"))
		if errors.Is(err, fs.ErrNotExist) {
			continue // a module that builds its own main package, or a package of a required module's main module
		}
		if err != nil {
			t.Fatal(err)
		}
		for name, pkg := range m.Binaries {
			if !strings.Contains(string(src), `"`+pkg+`"`) {
				t.Errorf("%s/tools.go does not import %s, the package of %s", m.Dir, pkg, name)
			}
		}
	}
}

func TestRequiredVersion(t *testing.T) {
	gomod := []byte("module example.com/t\n\ngo 1.26.0\n\nrequire (\n\tgithub.com/a/b v1.2.3\n\tgithub.com/c/d v0.1.0 // indirect\n)\n")
	if v, err := RequiredVersion(gomod, "github.com/c/d"); err != nil || v != "v0.1.0" {
		t.Errorf("RequiredVersion(c/d) = %q, %v; want v0.1.0", v, err)
	}
	if _, err := RequiredVersion(gomod, "github.com/x/y"); err == nil || !strings.Contains(err.Error(), "github.com/x/y") {
		t.Errorf("requiredVersion of a module not required = %v, want an error naming it", err)
	}
}

func TestMissingListsAbsentFilesSorted(t *testing.T) {
	dir := t.TempDir()
	present := filepath.Join(dir, "present")
	if err := os.WriteFile(present, nil, 0o755); err != nil {
		t.Fatal(err)
	}
	got := missing(map[string]string{"z": filepath.Join(dir, "z"), "present": present, "a": filepath.Join(dir, "a")})
	if strings.Join(got, ",") != "a,z" {
		t.Errorf("missing() = %v, want [a z]", got)
	}
}

func TestCacheDirPrefersEnvironment(t *testing.T) {
	if got := cacheDir("", "/repo"); got != "/repo/.cache" {
		t.Errorf("cacheDir without the env = %q, want /repo/.cache", got)
	}
	if got := cacheDir("/var/cache/stowage", "/repo"); got != "/var/cache/stowage" {
		t.Errorf("cacheDir with the env = %q, want /var/cache/stowage", got)
	}
}

// TestKubeVersionStamp checks the kube binaries are linked to report the pinned release, as Kubernetes' own
// build stamps them, and are cached apart from unstamped builds.
func TestKubeVersionStamp(t *testing.T) {
	got := strings.Join(kubeVersionStamp("v1.36.3"), " ")
	want := "-X k8s.io/component-base/version.gitVersion=v1.36.3 -X k8s.io/component-base/version.gitMajor=1 " +
		"-X k8s.io/component-base/version.gitMinor=36 -X k8s.io/component-base/version.gitTreeState=clean"
	if got != want {
		t.Errorf("kubeVersionStamp(v1.36.3) = %q, want %q", got, want)
	}
	for _, m := range []Module{Kube(), KubeScheduler()} {
		if m.LDFlags == nil || m.Name == "kubernetes" {
			t.Errorf("%v: kube binaries must be stamped and cached apart from the unstamped ones", m.Binaries)
		}
	}
}
