// Package tools builds the binaries of the nested modules beside it into the binary cache. Each folder here is a
// module of its own that pins one upstream project in its go.mod (the control plane, the S3 server, the
// upstream sidecars that Stowage's are compared with), built with GOWORK=off so their dependency versions never
// constrain Stowage's or each other's. A binary is built once per pinned version and then taken from the cache.
package tools

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

// CacheDirEnv overrides where built binaries are cached (default: <repo root>/.cache).
const CacheDirEnv = "STOWAGE_CACHE_DIR"

// Module is one nested module under e2e/tools and the binaries it builds.
type Module struct {
	Dir      string            // folder under e2e/tools
	Name     string            // names the cache folder together with the version
	Requires string            // the dependency whose version names the cache folder
	Binaries map[string]string // binary name -> package to build
	// LDFlags, if set, gives the linker flags for the pinned version (a version stamp).
	LDFlags func(version string) []string
	// TestBinary says the one package of Binaries is compiled with `go test -c`: a suite of Go tests run as
	// a program, such as Kubernetes' e2e.test.
	TestBinary bool
}

// Etcd is etcd's server, the control plane's store.
func Etcd() Module {
	// go build names the module-root main package after the module path's last element: etcd.
	return Module{Dir: "etcd", Name: "etcd", Requires: "go.etcd.io/etcd/server/v3", Binaries: map[string]string{"etcd": "."}}
}

// Kube is the API server and controller manager of k8s.io/kubernetes.
func Kube() Module {
	return Module{
		Dir: "kube", Name: kubeName, Requires: "k8s.io/kubernetes", LDFlags: kubeVersionStamp,
		Binaries: map[string]string{
			"kube-apiserver":          "k8s.io/kubernetes/cmd/kube-apiserver",
			"kube-controller-manager": "k8s.io/kubernetes/cmd/kube-controller-manager",
		},
	}
}

// KubeScheduler is kube-scheduler, from the same module and version as Kube and cached beside its binaries,
// but built only when a test asks for it.
func KubeScheduler() Module {
	return Module{
		Dir: "kube", Name: kubeName, Requires: "k8s.io/kubernetes", LDFlags: kubeVersionStamp,
		Binaries: map[string]string{"kube-scheduler": "k8s.io/kubernetes/cmd/kube-scheduler"},
	}
}

// Kubelet is the kubelet and kube-proxy of the rig's real nodes, from the same module, version and version
// stamp as Kube (the node reports the control plane's version, as in a cluster installed from one release).
func Kubelet() Module {
	return Module{
		Dir: "kube", Name: kubeName, Requires: "k8s.io/kubernetes", LDFlags: kubeVersionStamp,
		Binaries: map[string]string{
			"kubelet":    "k8s.io/kubernetes/cmd/kubelet",
			"kube-proxy": "k8s.io/kubernetes/cmd/kube-proxy",
		},
	}
}

// Containerd is the real nodes' container runtime: containerd v2, its runc shim and ctr (which imports the
// images the rig assembles). runc itself is Debian's: upstream's needs cgo and libseccomp.
func Containerd() Module {
	return Module{
		Dir: "containerd", Name: "containerd", Requires: "github.com/containerd/containerd/v2",
		Binaries: map[string]string{
			"containerd":              "github.com/containerd/containerd/v2/cmd/containerd",
			"containerd-shim-runc-v2": "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2",
			"ctr":                     "github.com/containerd/containerd/v2/cmd/ctr",
		},
	}
}

// CNIPlugins are the CNI plugins that give the real nodes' Pods their network. The kubelet's runtime looks
// them up by their plugin type, so the binaries keep those names.
func CNIPlugins() Module {
	return Module{
		Dir: "cni", Name: "cni-plugins", Requires: "github.com/containernetworking/plugins",
		Binaries: map[string]string{
			"bridge":     "github.com/containernetworking/plugins/plugins/main/bridge",
			"loopback":   "github.com/containernetworking/plugins/plugins/main/loopback",
			"host-local": "github.com/containernetworking/plugins/plugins/ipam/host-local",
		},
	}
}

// kubeName names the cache folder of the version-stamped kube binaries (the unstamped ones were cached as
// "kubernetes-<version>" and are not reused).
const kubeName = "kubernetes-stamped"

// kubeVersionStamp sets the version the binaries report, as Kubernetes' release build does
// (hack/lib/version.sh). Built from the module without it, kube-apiserver reports v0.0.0-master, which
// fails every Helm chart's kubeVersion constraint, so `helm install` would refuse the rig's cluster.
func kubeVersionStamp(version string) []string {
	major, minor, _ := strings.Cut(strings.TrimPrefix(version, "v"), ".")
	minor, _, _ = strings.Cut(minor, ".")
	pkg := "k8s.io/component-base/version."
	return []string{"-X", pkg + "gitVersion=" + version, "-X", pkg + "gitMajor=" + major, "-X", pkg + "gitMinor=" + minor,
		"-X", pkg + "gitTreeState=clean"}
}

// E2ETest is Kubernetes' end-to-end suite as the e2e.test program, from the same module, version and stamp
// as Kube: the storage suites a CSI driver is judged by (test/e2e/storage/external) run against the rig's
// real nodes. A cold build takes about 10 minutes and 2.6 GB of memory on 2 cores.
func E2ETest() Module {
	return Module{
		Dir: "kube", Name: kubeName, Requires: "k8s.io/kubernetes", LDFlags: kubeVersionStamp, TestBinary: true,
		Binaries: map[string]string{"e2e.test": "k8s.io/kubernetes/test/e2e"},
	}
}

// Agnhost is the e2e suite's all-purpose test program (the hostexec Pods that run commands on a node are
// agnhost's pause under nsenter), built from the same module so it matches e2e.test.
func Agnhost() Module {
	return Module{
		Dir: "kube", Name: kubeName, Requires: "k8s.io/kubernetes", LDFlags: kubeVersionStamp,
		Binaries: map[string]string{"agnhost": "k8s.io/kubernetes/test/images/agnhost"},
	}
}

// Versitygw is the S3 server the S3 tests and benchmarks run against.
func Versitygw() Module {
	return Module{
		Dir: "versitygw", Name: "versitygw", Requires: "github.com/versity/versitygw",
		Binaries: map[string]string{"versitygw": "github.com/versity/versitygw/cmd/versitygw"},
	}
}

// Rclone is rclone, whose `rclone mount` is the FUSE peer s3-fuse is benchmarked against.
func Rclone() Module {
	// The module's own main package (rclone's command with the S3 backend and mount only) builds as "rclone",
	// after the module path's last element.
	return Module{Dir: "rclone", Name: "rclone", Requires: "github.com/rclone/rclone", Binaries: map[string]string{"rclone": "."}}
}

// CSIAttacher is upstream's external-attacher, the peer of Stowage's csi-attacher.
func CSIAttacher() Module {
	return Module{
		Dir: "external-attacher", Name: "external-attacher", Requires: "github.com/kubernetes-csi/external-attacher/v4",
		Binaries: map[string]string{"csi-attacher": "github.com/kubernetes-csi/external-attacher/v4/cmd/csi-attacher"},
	}
}

// CSIProvisioner is upstream's external-provisioner, the peer of Stowage's csi-provisioner.
func CSIProvisioner() Module {
	return Module{
		Dir: "external-provisioner", Name: "external-provisioner", Requires: "github.com/kubernetes-csi/external-provisioner/v6",
		Binaries: map[string]string{"csi-provisioner": "github.com/kubernetes-csi/external-provisioner/v6/cmd/csi-provisioner"},
	}
}

// Helm is Helm's command line, which installs Stowage's charts on the real nodes as users do.
func Helm() Module {
	return Module{Dir: "helm", Name: "helm", Requires: "helm.sh/helm/v3", Binaries: map[string]string{"helm": "helm.sh/helm/v3/cmd/helm"}}
}

// CacheDir is $STOWAGE_CACHE_DIR, else <repo root>/.cache.
func CacheDir(repoRoot string) string { return cacheDir(os.Getenv(CacheDirEnv), repoRoot) }

func cacheDir(env, repoRoot string) string {
	if env != "" {
		return env
	}
	return filepath.Join(repoRoot, ".cache")
}

// Binary returns the path of one of m's binaries, building it first if the cache lacks it.
func Binary(ctx context.Context, m Module, name string) (string, error) {
	root, err := rig.RepoRoot(".")
	if err != nil {
		return "", err
	}
	paths, err := Ensure(ctx, root, CacheDir(root), m)
	if err != nil {
		return "", err
	}
	p, ok := paths[name]
	if !ok {
		return "", fmt.Errorf("module e2e/tools/%s builds no binary %q", m.Dir, name)
	}
	return p, nil
}

// Version is the version of m.Requires that m's go.mod pins.
func Version(repoRoot string, m Module) (string, error) {
	gomod, err := os.ReadFile(filepath.Join(repoRoot, "e2e", "tools", m.Dir, "go.mod"))
	if err != nil {
		return "", fmt.Errorf("read tools module: %w", err)
	}
	v, err := RequiredVersion(gomod, m.Requires)
	if err != nil {
		return "", fmt.Errorf("e2e/tools/%s/go.mod: %w", m.Dir, err)
	}
	return v, nil
}

// Ensure returns the paths of m's binaries in the cache, building those that are missing. An flock on the
// cache keeps concurrent test packages from building the same binaries twice.
func Ensure(ctx context.Context, repoRoot, cache string, m Module) (map[string]string, error) {
	version, err := Version(repoRoot, m)
	if err != nil {
		return nil, err
	}
	binDir := filepath.Join(cache, "bin", m.Name+"-"+version)
	paths := map[string]string{}
	for name := range m.Binaries {
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
		pkgs = append(pkgs, m.Binaries[name])
	}
	var ldflags []string
	if m.LDFlags != nil {
		ldflags = m.LDFlags(version)
	}
	if err := goBuild(ctx, filepath.Join(repoRoot, "e2e", "tools", m.Dir), binDir, todo, pkgs, ldflags, m.TestBinary); err != nil {
		return nil, fmt.Errorf("build %s %s: %w", m.Name, version, err)
	}
	return paths, nil
}

// requiredVersion returns the version of module that a go.mod requires.
func RequiredVersion(gomod []byte, module string) (string, error) {
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
func goBuild(ctx context.Context, modDir, binDir string, names, pkgs, ldflags []string, test bool) error {
	logger := klog.FromContext(ctx)
	scratch, err := os.MkdirTemp(filepath.Dir(binDir), ".build-")
	if err != nil {
		return fmt.Errorf("create build dir: %w", err)
	}
	defer os.RemoveAll(scratch)

	// No VCS stamp: the binaries are the same wherever the repository is checked out. Static, so a binary
	// built on one machine of this kind runs on the next.
	args := []string{"build", "-trimpath", "-buildvcs=false", "-o", scratch + string(filepath.Separator)}
	if test {
		// go test -c compiles one package per call and names its output after the package, not the binary.
		if len(pkgs) != 1 {
			return fmt.Errorf("go test -c builds one package at a time, not %d", len(pkgs))
		}
		// -vet=off: vetting upstream's tests is its CI's job, and costs minutes here.
		args = []string{"test", "-c", "-vet=off", "-trimpath", "-buildvcs=false", "-o", filepath.Join(scratch, names[0])}
	}
	if len(ldflags) > 0 {
		args = append(args, "-ldflags="+strings.Join(ldflags, " "))
	}
	args = append(args, pkgs...)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = modDir
	cmd.Env = append(os.Environ(), "GOWORK=off", "CGO_ENABLED=0")
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }

	logger.Info("Building tool binaries; a cold Go build cache takes minutes per binary on 2 cores",
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
			logger.Info("Built tool binaries", "binaries", names, "took", time.Since(start).Round(time.Second))
			return nil
		case <-tick.C:
			logger.Info("Still building tool binaries", "binaries", names, "elapsed", time.Since(start).Round(time.Second))
		}
	}
}
