package cluster

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"golang.org/x/mod/modfile"
	"k8s.io/klog/v2"

	"github.com/stowage-csi/stowage/e2e/rig"
)

// toolModule is one nested module under e2e/tools that builds control-plane binaries. Each has its own
// go.mod so etcd's and Kubernetes' dependency versions never constrain each other.
type toolModule struct {
	dir      string            // relative to the repository root
	name     string            // names the cache folder together with the version
	module   string            // the dependency whose version names the cache folder
	binaries map[string]string // binary name -> package to build
}

func toolModules() []toolModule {
	return []toolModule{
		{
			dir:    filepath.Join("e2e", "tools", "etcd"),
			name:   "etcd",
			module: "go.etcd.io/etcd/server/v3",
			// go build names the module-root main package after the module path's last element: etcd.
			binaries: map[string]string{"etcd": "."},
		},
		{
			dir:    filepath.Join("e2e", "tools", "kube"),
			name:   "kubernetes",
			module: "k8s.io/kubernetes",
			binaries: map[string]string{
				"kube-apiserver":          "k8s.io/kubernetes/cmd/kube-apiserver",
				"kube-controller-manager": "k8s.io/kubernetes/cmd/kube-controller-manager",
			},
		},
	}
}

// binaries holds the paths of the control-plane executables.
type binaries struct {
	etcd, apiserver, controllerManager string
}

// ensureBinaries returns the cached control-plane binaries, building those that are missing. An flock on
// the cache keeps concurrent test packages from building the same binaries twice.
func ensureBinaries(ctx context.Context, repoRoot, cache string) (binaries, error) {
	paths := map[string]string{}
	for _, tm := range toolModules() {
		got, err := ensureToolModule(ctx, repoRoot, cache, tm)
		if err != nil {
			return binaries{}, err
		}
		for name, p := range got {
			paths[name] = p
		}
	}
	return binaries{etcd: paths["etcd"], apiserver: paths["kube-apiserver"], controllerManager: paths["kube-controller-manager"]}, nil
}

func ensureToolModule(ctx context.Context, repoRoot, cache string, tm toolModule) (map[string]string, error) {
	modDir := filepath.Join(repoRoot, tm.dir)
	gomod, err := os.ReadFile(filepath.Join(modDir, "go.mod"))
	if err != nil {
		return nil, fmt.Errorf("read tools module: %w", err)
	}
	version, err := requiredVersion(gomod, tm.module)
	if err != nil {
		return nil, fmt.Errorf("%s/go.mod: %w", tm.dir, err)
	}
	binDir := filepath.Join(cache, "bin", tm.name+"-"+version)
	paths := map[string]string{}
	for name := range tm.binaries {
		paths[name] = filepath.Join(binDir, name)
	}
	if len(missing(paths)) == 0 {
		return paths, nil
	}

	if err := os.MkdirAll(binDir, 0o755); err != nil {
		return nil, fmt.Errorf("create binary cache: %w", err)
	}
	unlock, err := rig.LockFile(ctx, filepath.Join(cache, "bin", ".build.lock"))
	if err != nil {
		return nil, err
	}
	defer unlock()
	// Another process may have built them while this one waited for the lock.
	todo := missing(paths)
	if len(todo) == 0 {
		return paths, nil
	}
	pkgs := make([]string, 0, len(todo))
	for _, name := range todo {
		pkgs = append(pkgs, tm.binaries[name])
	}
	if err := goBuild(ctx, modDir, binDir, todo, pkgs); err != nil {
		return nil, fmt.Errorf("build %s %s: %w", tm.name, version, err)
	}
	return paths, nil
}

// requiredVersion returns the version of module that a go.mod requires.
func requiredVersion(gomod []byte, module string) (string, error) {
	f, err := modfile.Parse("go.mod", gomod, nil)
	if err != nil {
		return "", fmt.Errorf("parse: %w", err)
	}
	for _, r := range f.Require {
		if r.Mod.Path == module {
			return r.Mod.Version, nil
		}
	}
	return "", fmt.Errorf("does not require %s", module)
}

// missing returns the sorted names whose files do not exist.
func missing(paths map[string]string) []string {
	var out []string
	for name, p := range paths {
		if _, err := os.Stat(p); err != nil {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// goBuild builds pkgs of the module in modDir into a scratch folder and renames each binary into binDir,
// so a killed build never leaves a half-written binary that later runs would take as built.
func goBuild(ctx context.Context, modDir, binDir string, names, pkgs []string) error {
	logger := klog.FromContext(ctx)
	scratch, err := os.MkdirTemp(filepath.Dir(binDir), ".build-")
	if err != nil {
		return fmt.Errorf("create build dir: %w", err)
	}
	defer os.RemoveAll(scratch)

	// No VCS stamp: the binaries are the same wherever the repository is checked out.
	args := append([]string{"build", "-buildvcs=false", "-o", scratch + string(filepath.Separator)}, pkgs...)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = modDir
	cmd.Env = append(os.Environ(), "GOWORK=off")
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }

	logger.Info("Building control-plane binaries; a cold Go build cache takes about 4 minutes per Kubernetes binary on 2 cores",
		"binaries", names, "module", modDir, "into", binDir)
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start go build: %w", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	tick := time.NewTicker(30 * time.Second)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			if ctx.Err() != nil {
				return fmt.Errorf("go build stopped after %s (a cold build needs more time; go test's default -timeout is 10m): %w",
					time.Since(start).Round(time.Second), ctx.Err())
			}
			if err != nil {
				return fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, out.String())
			}
			for _, name := range names {
				if err := os.Rename(filepath.Join(scratch, name), filepath.Join(binDir, name)); err != nil {
					return fmt.Errorf("install %s: %w", name, err)
				}
			}
			logger.Info("Built control-plane binaries", "binaries", names, "took", time.Since(start).Round(time.Second))
			return nil
		case <-tick.C:
			logger.Info("Still building control-plane binaries", "binaries", names, "elapsed", time.Since(start).Round(time.Second))
		}
	}
}
