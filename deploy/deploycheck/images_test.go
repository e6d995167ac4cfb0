package deploycheck

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// repoRoot is the repository's work tree, from this package's folder.
const repoRoot = "../.."

// image is one line of deploy/images/images.tsv.
type image struct{ name, module string }

func readImages(t *testing.T) []image {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, "deploy/images/images.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	var images []image
	for _, l := range strings.Split(string(data), "\n") {
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		f := strings.Fields(l)
		if len(f) != 2 {
			t.Fatalf("images.tsv: want `image module`, got %q", l)
		}
		images = append(images, image{f[0], f[1]})
	}
	return images
}

func parseImagesDockerfile(t *testing.T) *Dockerfile {
	t.Helper()
	d, err := ParseDockerfile(filepath.Join(repoRoot, "deploy/images/Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// binaries lists <module>/cmd/<binary> for every module with a cmd folder but e2e (the test rig, not shipped):
// what must ship in an image.
func binaries(t *testing.T) map[string]string {
	t.Helper()
	mains, err := filepath.Glob(filepath.Join(repoRoot, "*", "cmd", "*", "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	bins := map[string]string{} // binary -> module
	for _, m := range mains {
		cmd := filepath.Dir(m)
		if strings.HasPrefix(cmd, filepath.Join(repoRoot, "e2e")+"/") {
			continue
		}
		bins[filepath.Base(cmd)] = filepath.Base(filepath.Dir(filepath.Dir(cmd)))
	}
	if len(bins) == 0 {
		t.Fatal("no <module>/cmd/<binary>/main.go found")
	}
	return bins
}

func TestEveryBinaryShipsInAnImage(t *testing.T) {
	d := parseImagesDockerfile(t)
	shipped := map[string]bool{}
	for _, img := range readImages(t) {
		for _, from := range d.Files(img.name) {
			if bin, ok := strings.CutPrefix(from, "build:/out/"); ok {
				shipped[img.module+"/"+bin] = true
			}
		}
	}
	for bin, module := range binaries(t) {
		if !shipped[module+"/"+bin] {
			t.Errorf("%s/cmd/%s is in no image: add a stage to deploy/images/Dockerfile and a line to images.tsv", module, bin)
		}
	}
}

// TestImagesBuildFromTheirModule checks each image's stage as a builder would resolve it, without one: the
// target exists, every build-context COPY source exists once MODULE is expanded and is not excluded by
// Dockerfile.dockerignore, the module's local replace directives point only at what is copied, every binary
// taken from the build stage is one of the module's commands, and the entrypoint is a file the image holds.
func TestImagesBuildFromTheirModule(t *testing.T) {
	d := parseImagesDockerfile(t)
	bins := binaries(t)
	ignored := readDockerignore(t)
	build := d.Stage("build")
	if build == nil {
		t.Fatal("deploy/images/Dockerfile has no stage named build")
	}
	for _, img := range readImages(t) {
		t.Run(img.name, func(t *testing.T) {
			s := d.Stage(img.name)
			if s == nil {
				t.Fatalf("no stage (target) %s in deploy/images/Dockerfile", img.name)
			}
			args := map[string]string{"MODULE": img.module}
			var copied []string
			for _, c := range build.Copies {
				for _, src := range c.Src {
					p := strings.TrimSuffix(Expand(src, args), "/")
					copied = append(copied, p)
					if _, err := os.Stat(filepath.Join(repoRoot, p)); err != nil {
						t.Errorf("COPY source %s (MODULE=%s): %v", src, img.module, err)
					}
					if slices.Contains(ignored, p) {
						t.Errorf("COPY source %s is excluded by Dockerfile.dockerignore", p)
					}
				}
			}
			gomod, err := os.ReadFile(filepath.Join(repoRoot, img.module, "go.mod"))
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range strings.Split(string(gomod), "\n") {
				if _, target, ok := strings.Cut(l, "=>"); ok && strings.HasPrefix(strings.TrimSpace(target), "../") {
					dep := filepath.Clean(filepath.Join(img.module, strings.TrimSpace(target)))
					if !slices.Contains(copied, dep) {
						t.Errorf("%s/go.mod replaces a module with %s, which the build stage does not copy", img.module, dep)
					}
				}
			}
			files := d.Files(img.name)
			for path, from := range files {
				if bin, ok := strings.CutPrefix(from, "build:/out/"); ok && bins[bin] != img.module {
					t.Errorf("%s takes /out/%s from the build stage, which module %s does not build", path, bin, img.module)
				}
			}
			if len(s.Entrypoint) == 0 {
				t.Fatal("no ENTRYPOINT")
			}
			if files[s.Entrypoint[0]] == "" {
				t.Errorf("ENTRYPOINT %s is not a file the image holds (%v)", s.Entrypoint[0], files)
			}
		})
	}
}

// TestImagesHoldUpstreamPaths: manifests written for upstream's images exec these paths, so a swapped image
// must answer there (see each module's README).
func TestImagesHoldUpstreamPaths(t *testing.T) {
	d := parseImagesDockerfile(t)
	for _, c := range []struct{ image, path, binary string }{
		{"csi-attacher", "/csi-attacher", "csi-attacher"},
		{"csi-provisioner", "/csi-provisioner", "csi-provisioner"},
		{"csi-resizer", "/csi-resizer", "csi-resizer"},
		{"csi-snapshotter", "/csi-snapshotter", "csi-snapshotter"},
		{"snapshot-controller", "/snapshot-controller", "snapshot-controller"},
		{"csi-node-driver-registrar", "/csi-node-driver-registrar", "csi-node-driver-registrar"},
		{"livenessprobe", "/livenessprobe", "livenessprobe"},
		{"ebs-plugin", "/bin/aws-ebs-csi-driver", "ebs-plugin"}, // the node pod's preStop hook
		{"s3-controller", "/bin/aws-s3-csi-controller", "s3-controller"},
		{"s3-node", "/bin/aws-s3-csi-driver", "s3-node"},
		{"s3-mounter", "/bin/aws-s3-csi-mounter", "s3-mounter"},  // s3-controller's --mountpoint-container-command
		{"s3-mounter", "/mountpoint-s3/bin/mount-s3", "s3-fuse"}, // s3-mounter's --mountpoint-bin-dir
	} {
		if got := d.Files(c.image)[c.path]; got != "build:/out/"+c.binary {
			t.Errorf("image %s: %s holds %q, want %s", c.image, c.path, got, c.binary)
		}
	}
}

// TestImagesRunAsTheyMust: the images whose binary needs no privilege run as a non-root user; the Mountpoint
// Pod's as uid 1000, which the Pods s3-controller creates and the mount-s3 namespace's restricted policy expect.
func TestImagesRunAsTheyMust(t *testing.T) {
	d := parseImagesDockerfile(t)
	for image, user := range map[string]string{
		"snapshot-controller": "65532:65532",
		"s3-controller":       "65532:65532",
		"s3-mounter":          "1000:1000",
	} {
		if s := d.Stage(image); s == nil || s.User != user {
			t.Errorf("image %s: USER %v, want %s", image, s, user)
		}
	}
	if s := d.Stage("s3-mounter"); s != nil && s.Env["MOUNTPOINT_BIN_DIR"] != "/mountpoint-s3/bin" {
		t.Errorf("image s3-mounter: MOUNTPOINT_BIN_DIR=%q, want /mountpoint-s3/bin", s.Env["MOUNTPOINT_BIN_DIR"])
	}
	// The node tools are ebs-plugin's alone: every other image stays static.
	for _, s := range d.Stages {
		if s.From == "node-tools" && s.Name != "ebs-plugin" {
			t.Errorf("image %s is built on node-tools; only ebs-plugin execs file system tools", s.Name)
		}
	}
}

// TestNoModuleDockerfiles: the template replaced the per-module copies; a new one would drift from it.
func TestNoModuleDockerfiles(t *testing.T) {
	found, err := filepath.Glob(filepath.Join(repoRoot, "*", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range found {
		t.Errorf("%s: images are built from deploy/images/Dockerfile (add a target there)", f)
	}
}

func readDockerignore(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, "deploy/images/Dockerfile.dockerignore"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range strings.Split(string(data), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return out
}
