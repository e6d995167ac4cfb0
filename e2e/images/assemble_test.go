package images

import (
	"archive/tar"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// TestAssembleEveryImageAndCheckIt assembles every image of images.tsv from stand-in binaries and checks
// each archive against its Dockerfile stage.
func TestAssembleEveryImageAndCheckIt(t *testing.T) {
	table, err := ReadImageTable(filepath.Join(repoRoot(t), "deploy", "images", "images.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	as := assembleStandIns(t, t.TempDir(), standInBinDir(t))
	if len(as) != len(table) {
		t.Fatalf("%d archives for %d images", len(as), len(table))
	}
	d := readRepoDockerfile(t)
	for _, a := range as {
		want := []string{"stowage/" + a.Image + ":test"}
		if !slices.Equal(a.Refs, want) {
			t.Errorf("%s: refs %q, want %q", a.Image, a.Refs, want)
		}
		spec, err := d.Spec(a.Image)
		if err != nil {
			t.Fatal(err)
		}
		if err := CheckImage(a.Path, a.Refs[0], spec); err != nil {
			t.Error(err)
		}
	}
}

func TestAssembleRefusesLatestAndAMissingBinary(t *testing.T) {
	ctx := context.Background()
	for _, tag := range []string{"", "latest"} {
		_, err := Assemble(ctx, Options{RepoRoot: repoRoot(t), BinDir: t.TempDir(), CacheDir: t.TempDir(), Tag: tag})
		if err == nil || !strings.Contains(err.Error(), "latest") {
			t.Errorf("tag %q: %v, want a refusal", tag, err)
		}
	}
	_, err := Assemble(ctx, Options{RepoRoot: repoRoot(t), BinDir: t.TempDir(), CacheDir: t.TempDir(), Tag: "t", Images: []string{"csi-attacher"}})
	if err == nil || !strings.Contains(err.Error(), "csi-attacher") || !strings.Contains(err.Error(), "make build") {
		t.Errorf("no binaries: %v, want an error naming the binary and make build", err)
	}
}

// TestNodeToolsImageHoldsMkfsWithEveryLibraryAndIsReused: the ebs-plugin image runs the host's mkfs.ext4,
// so it must hold every library ldd lists for it (and the loader); assembling it again reuses the archive.
func TestNodeToolsImageHoldsMkfsWithEveryLibraryAndIsReused(t *testing.T) {
	cache, bins := t.TempDir(), standInBinDir(t)
	a := archiveNamed(t, assembleStandIns(t, cache, bins, "ebs-plugin"), "ebs-plugin")
	fsys := readArchive(t, a)

	out, err := exec.Command("ldd", "/usr/sbin/mkfs.ext4").Output()
	if err != nil {
		t.Fatalf("ldd: %v", err)
	}
	libs := regexp.MustCompile(`(?m)(/\S+) \(0x`).FindAllStringSubmatch(string(out), -1)
	if len(libs) < 3 {
		t.Fatalf("ldd listed %d libraries: %s", len(libs), out)
	}
	for _, p := range append([]string{"/sbin/mkfs.ext4", "/usr/sbin/mkfs.xfs", "/bin/sh", "/etc/mke2fs.conf"}, subMatches(libs)...) {
		real, err := fsys.resolve(p, 0)
		if err != nil {
			t.Fatal(err)
		}
		if n := fsys.get(real); n == nil || n.typ != tar.TypeReg {
			t.Errorf("%s (%s): not a file in the image", p, real)
		}
	}

	// Run the tools from the image's own files: its loader and libraries must be complete.
	if os.Geteuid() == 0 {
		root := extract(t, a)
		for _, argv := range [][]string{{"/sbin/mkfs.ext4", "-V"}, {"/bin/sh", "-c", "mkfs.xfs -V && blkid -V"}} {
			out, err := exec.Command("chroot", append([]string{root}, argv...)...).CombinedOutput()
			if err != nil {
				t.Errorf("chroot %s: %v: %s", strings.Join(argv, " "), err, out)
			}
		}
	}

	before, err := os.Stat(a.Path)
	if err != nil {
		t.Fatal(err)
	}
	again := archiveNamed(t, assembleStandIns(t, cache, bins, "ebs-plugin"), "ebs-plugin")
	after, err := os.Stat(again.Path)
	if err != nil {
		t.Fatal(err)
	}
	if !os.SameFile(before, after) {
		t.Errorf("re-assembly wrote %s anew (was %s)", again.Path, a.Path)
	}

}

// TestAssembleMakesANewArchiveWhenABinaryChanges: the cache key covers the binaries' contents.
func TestAssembleMakesANewArchiveWhenABinaryChanges(t *testing.T) {
	cache, bins := t.TempDir(), standInBinDir(t)
	a := archiveNamed(t, assembleStandIns(t, cache, bins, "csi-attacher"), "csi-attacher")
	if err := os.WriteFile(filepath.Join(bins, "csi-attacher"), []byte("#!/bin/sh\necho changed\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	changed := archiveNamed(t, assembleStandIns(t, cache, bins, "csi-attacher"), "csi-attacher")
	if changed.Path == a.Path {
		t.Errorf("a changed binary reused %s", a.Path)
	}
	if err := changed.Check(); err != nil {
		t.Error(err)
	}
}

func subMatches(ms [][]string) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m[1])
	}
	return out
}

// extract lays the image's layers out in a folder, as a runtime would.
func extract(t *testing.T, a Archive) string {
	t.Helper()
	tag, err := name.NewTag(a.Refs[0])
	if err != nil {
		t.Fatal(err)
	}
	img, err := tarball.ImageFromPath(a.Path, &tag)
	if err != nil {
		t.Fatal(err)
	}
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			p := filepath.Join(root, h.Name)
			switch h.Typeflag {
			case tar.TypeDir:
				err = os.MkdirAll(p, 0o755)
			case tar.TypeSymlink:
				_ = os.Remove(p)
				err = os.Symlink(h.Linkname, p)
			case tar.TypeReg:
				var data []byte
				if data, err = io.ReadAll(tr); err == nil {
					err = os.WriteFile(p, data, os.FileMode(h.Mode).Perm())
				}
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		rc.Close()
	}
	return root
}

func readArchive(t *testing.T, a Archive) stack {
	t.Helper()
	tag, err := name.NewTag(a.Refs[0])
	if err != nil {
		t.Fatal(err)
	}
	img, err := tarball.ImageFromPath(a.Path, &tag)
	if err != nil {
		t.Fatal(err)
	}
	s, err := readLayers(img)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestNodeToolsCoverWhatEbsPluginRuns: every program ebs-plugin runs by name (its own exec calls and its
// start-up list of required tools) is one the node image copies.
func TestNodeToolsCoverWhatEbsPluginRuns(t *testing.T) {
	var tools []string
	for _, ts := range packageFiles {
		for _, tool := range ts {
			tools = append(tools, tool.name)
		}
	}
	files, err := filepath.Glob(filepath.Join(repoRoot(t), "ebs-plugin", "internal", "*", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	command := regexp.MustCompile(`Command(?:Context)?\((?:ctx, )?"([^"]+)"`)
	listed := regexp.MustCompile(`(?s)func ToolsAvailable\(\).*?\[\]string\{([^}]*)\}`)
	found := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, m := range command.FindAllStringSubmatch(string(src), -1) {
			names = append(names, m[1])
		}
		if m := listed.FindStringSubmatch(string(src)); m != nil {
			for _, q := range strings.Split(m[1], ",") {
				names = append(names, strings.Trim(strings.TrimSpace(q), `"`))
			}
		}
		for _, n := range names {
			found++
			if !slices.Contains(tools, n) {
				t.Errorf("%s runs %s, which the node image does not copy (add it to packageFiles)", filepath.Base(f), n)
			}
		}
	}
	if found < 10 {
		t.Errorf("found %d program names in ebs-plugin; the patterns no longer match its code", found)
	}
}
