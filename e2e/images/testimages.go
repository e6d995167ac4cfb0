package images

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// The images Kubernetes' storage tests use (`e2e.test -list-images`), under their upstream names so no
// registry remapping is needed.
const (
	// PauseImage is every pod's sandbox; the kubelet's and containerd's pinned default.
	PauseImage = "registry.k8s.io/pause:3.10.2"
	// BusyboxImage is the rig's own pods' image.
	BusyboxImage = "busybox:1.37"
	// AgnhostImage is the e2e suite's test program; the storage suites run it as the hostexec Pod, which
	// runs commands on a node through nsenter.
	AgnhostImage = "registry.k8s.io/e2e-test-images/agnhost:2.63.0"
)

// GlibcImage is the Debian image the storage suites' multiVolume specs run their Pods in: they write a block
// device with GNU dd's oflag=nocache, which busybox's dd refuses.
const GlibcImage = "registry.k8s.io/e2e-test-images/glibc-dns-testing:2.0.0"

// BusyboxImages returns the names the busybox image answers to: the e2e framework's busybox, and nginx, which
// storage tests only run `sh -c` in.
func BusyboxImages() []string {
	return []string{
		BusyboxImage,
		"registry.k8s.io/e2e-test-images/busybox:1.37.0-1",
		"registry.k8s.io/e2e-test-images/busybox:1.36.1-1",
		"registry.k8s.io/e2e-test-images/nginx:1.15-4",
	}
}

// TestOptions say where TestImages writes and where the pause binary comes from.
type TestOptions struct {
	// CacheDir is the rig's cache (tools.CacheDir); archives are written under CacheDir/images.
	CacheDir string
	// PauseBinary is a static pause binary to use. If empty, e2e/cmd/pause of RepoRoot is built into the
	// cache with CGO_ENABLED=0.
	PauseBinary string
	RepoRoot    string
}

// TestImages writes three archives: pause (PauseImage), busybox (every name of BusyboxImages, one image) and
// GlibcImage, busybox with Debian's GNU coreutils, grep and dash over it.
// Like Assemble, it reuses an archive whose inputs are unchanged.
func TestImages(ctx context.Context, o TestOptions) ([]Archive, error) {
	if o.CacheDir == "" {
		return nil, errors.New("images: CacheDir is required")
	}
	dir := filepath.Join(o.CacheDir, ImageDir)
	pause := o.PauseBinary
	if pause == "" {
		if o.RepoRoot == "" {
			return nil, errors.New("images: RepoRoot is required to build pause")
		}
		var err error
		if pause, err = buildPause(ctx, o.RepoRoot, dir); err != nil {
			return nil, err
		}
	}
	pauseSpec := &Spec{
		Name: "pause", Base: BaseScratch, Copies: []Copy{{Bin: "pause", Dst: "/pause"}},
		// As the real image: the sandbox runs as 65535 unless the pod asks otherwise.
		Entrypoint: []string{"/pause"}, User: "65535:65535",
	}
	source := func(string) (string, error) { return pause, nil }
	p, err := assemble(ctx, pauseSpec, []string{PauseImage}, source, dir)
	if err != nil {
		return nil, err
	}
	busybox := baseSpec(BaseBusybox)
	busybox.Name = "busybox"
	busybox.Links = []Link{{Path: "/bin/sh", Target: "busybox"}}
	noBinaries := func(bin string) (string, error) { return "", fmt.Errorf("no binary %s in a busybox image", bin) }
	b, err := assemble(ctx, busybox, BusyboxImages(), noBinaries, dir)
	if err != nil {
		return nil, err
	}
	// Busybox's applets for the tools the suites' Pods run besides these, GNU coreutils and grep in /usr/bin
	// ahead of them on PATH, and dash as /bin/sh: busybox's own shell runs its applets before PATH's programs,
	// so under it `dd` would still be busybox's.
	glibc := baseSpec(BaseBusybox)
	glibc.Name, glibc.Packages = "glibc-dns-testing", []string{"coreutils", "grep", "dash"}
	glibc.Links = []Link{{Path: "/bin/sh", Target: "/usr/bin/dash"}}
	g, err := assemble(ctx, glibc, []string{GlibcImage}, noBinaries, dir)
	if err != nil {
		return nil, err
	}
	return []Archive{p, b, g}, nil
}

// buildPause builds e2e/cmd/pause into dir/bin/pause. Go's build cache makes a rebuild of unchanged
// sources cheap, and -trimpath makes the binary (so the archive's key) the same each time.
func buildPause(ctx context.Context, repoRoot, dir string) (string, error) {
	binDir := filepath.Join(dir, "bin")
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(binDir, ".pause-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", filepath.Join(tmp, "pause"), "./cmd/pause")
	cmd.Dir = filepath.Join(repoRoot, "e2e")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build pause: %w: %s", err, out)
	}
	out := filepath.Join(binDir, "pause")
	// A rename, so a concurrent assembly reading the previous binary never sees a half-written one.
	if err := os.Rename(filepath.Join(tmp, "pause"), out); err != nil {
		return "", err
	}
	return out, nil
}

// Agnhost writes the agnhost image (AgnhostImage) around an agnhost binary (tools.Agnhost): on the busybox
// base, whose applets stand in for the real image's Debian tools (nsenter, sh, mount), with agnhost's
// entrypoint and its default command, pause.
func Agnhost(ctx context.Context, cacheDir, binary string) (Archive, error) {
	if cacheDir == "" {
		return Archive{}, errors.New("images: CacheDir is required")
	}
	spec := &Spec{
		Name: "agnhost", Base: BaseBusybox, Copies: []Copy{{Bin: "agnhost", Dst: "/agnhost"}},
		Entrypoint: []string{"/agnhost"}, Cmd: []string{"pause"},
	}
	source := func(string) (string, error) { return binary, nil }
	return assemble(ctx, spec, []string{AgnhostImage}, source, filepath.Join(cacheDir, ImageDir))
}
