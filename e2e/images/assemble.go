// Package images assembles the container images a real node of the rig runs, without a builder or a
// registry: every Stowage image as deploy/images/Dockerfile describes it (from `make build`'s binaries), and
// the few images Kubernetes' storage tests pull (pause, busybox under several names). Each is written as a
// docker-archive tarball for `ctr -n k8s.io images import`, into a cache keyed by a hash of everything that
// goes into it, so assembling again with the same inputs does no work.
package images

import (
	"bufio"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"k8s.io/klog/v2"
)

// Options say which Stowage images Assemble makes and where.
type Options struct {
	// RepoRoot is the Stowage work tree: deploy/images/Dockerfile and images.tsv are read from it.
	RepoRoot string
	// BinDir holds `make build`'s binaries; default RepoRoot/bin.
	BinDir string
	// CacheDir is the rig's cache (tools.CacheDir); archives are written under CacheDir/images.
	CacheDir string
	// Repository prefixes every image's name; default "stowage" (stowage/csi-attacher:<Tag>).
	Repository string
	// Tag is every image's tag. Required, and not "latest": with another tag the kubelet's default pull
	// policy is IfNotPresent, so it uses the imported image instead of pulling.
	Tag string
	// Images limits the assembly to these names of images.tsv; default every one.
	Images []string
}

// Archive is one docker-archive tarball.
type Archive struct {
	Image string   // the image's name: images.tsv's first column, or "pause" or "busybox"
	Path  string   // import with `ctr -n k8s.io images import <Path>`
	Refs  []string // the tagged references it holds (all of the same image)
	Spec  *Spec    // what the image was assembled from, for Check
}

// Check verifies the archive's images against the Spec it was assembled from (see CheckImage).
func (a Archive) Check() error {
	var errs []error
	for _, r := range a.Refs {
		errs = append(errs, CheckImage(a.Path, r, a.Spec))
	}
	return errors.Join(errs...)
}

// ImageDir is the folder under the cache directory that holds the archives.
const ImageDir = "images"

// Assemble writes an archive for each Stowage image of deploy/images/images.tsv, each as the Dockerfile's
// stage of that name builds it. An archive whose inputs (binaries, Dockerfile stage, host files, tag) are
// unchanged is reused as it is.
func Assemble(ctx context.Context, o Options) ([]Archive, error) {
	if o.Tag == "" || o.Tag == "latest" {
		return nil, fmt.Errorf("images: tag %q: give a tag other than latest (the kubelet would pull it)", o.Tag)
	}
	if o.RepoRoot == "" || o.CacheDir == "" {
		return nil, errors.New("images: RepoRoot and CacheDir are required")
	}
	if o.BinDir == "" {
		o.BinDir = filepath.Join(o.RepoRoot, "bin")
	}
	if o.Repository == "" {
		o.Repository = "stowage"
	}
	table, err := ReadImageTable(filepath.Join(o.RepoRoot, "deploy", "images", "images.tsv"))
	if err != nil {
		return nil, err
	}
	df, err := ReadDockerfile(filepath.Join(o.RepoRoot, "deploy", "images", "Dockerfile"))
	if err != nil {
		return nil, err
	}
	for _, want := range o.Images {
		if !slices.ContainsFunc(table, func(e TableEntry) bool { return e.Image == want }) {
			return nil, fmt.Errorf("images: %s is not in images.tsv", want)
		}
	}
	var out []Archive
	for _, e := range table {
		if len(o.Images) > 0 && !slices.Contains(o.Images, e.Image) {
			continue
		}
		spec, err := df.Spec(e.Image)
		if err != nil {
			return nil, err
		}
		ref := o.Repository + "/" + e.Image + ":" + o.Tag
		a, err := assemble(ctx, spec, []string{ref}, binDirSource(o.BinDir), filepath.Join(o.CacheDir, ImageDir))
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}

// binDirSource finds a COPY's binary in dir.
func binDirSource(dir string) func(string) (string, error) {
	return func(bin string) (string, error) {
		p := filepath.Join(dir, bin)
		fi, err := os.Stat(p)
		if err != nil {
			return "", fmt.Errorf("binary %s: %w (run make build)", bin, err)
		}
		if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
			return "", fmt.Errorf("binary %s: not an executable file (%s)", p, fi.Mode())
		}
		return p, nil
	}
}

// archiveFormat changes whenever the assembler lays images out differently, so archives of an older layout
// are not reused.
const archiveFormat = "stowage-images/1"

// assemble plans spec's image, and writes it under dir tagged as each of refs unless an archive of the same
// inputs is there already.
func assemble(ctx context.Context, spec *Spec, refs []string, source func(string) (string, error), dir string) (Archive, error) {
	a := Archive{Image: spec.Name, Refs: refs, Spec: spec}
	tags := make([]name.Tag, 0, len(refs))
	for _, r := range refs {
		t, err := name.NewTag(r)
		if err != nil {
			return a, fmt.Errorf("image %s: reference %q: %w", spec.Name, r, err)
		}
		tags = append(tags, t)
	}
	layers, err := plan(ctx, spec, source)
	if err != nil {
		return a, err
	}
	cfg := v1.ConfigFile{Architecture: "amd64", OS: "linux", Config: v1.Config{
		Entrypoint: spec.Entrypoint, Cmd: spec.Cmd, Env: spec.Env, User: spec.User, WorkingDir: spec.WorkingDir,
	}}
	key, err := inputKey(refs, cfg, layers)
	if err != nil {
		return a, err
	}
	a.Path = filepath.Join(dir, spec.Name+"-"+key[:24]+".tar")
	if _, err := os.Stat(a.Path); err == nil {
		klog.V(2).InfoS("Image archive is up to date", "image", spec.Name, "path", a.Path)
		return a, nil
	}
	if err := write(ctx, a.Path, tags, cfg, layers); err != nil {
		return a, fmt.Errorf("image %s: %w", spec.Name, err)
	}
	klog.InfoS("Assembled image", "image", spec.Name, "refs", refs, "path", a.Path)
	return a, nil
}

// plan lays out the image's layers: the base, the packages installed on it, then the stage's own files.
func plan(ctx context.Context, spec *Spec, source func(string) (string, error)) ([]tree, error) {
	b := &builder{}
	b.newLayer()
	if err := spec.addBase(ctx, b); err != nil {
		return nil, err
	}
	if len(spec.Packages) > 0 {
		b.newLayer()
		if err := spec.addPackages(b, exists); err != nil {
			return nil, err
		}
	}
	b.newLayer()
	for _, c := range spec.Copies {
		src, err := source(c.Bin)
		if err != nil {
			return nil, fmt.Errorf("image %s: COPY %s: %w", spec.Name, c.Dst, err)
		}
		// The bases hold only the libraries of the tools copied from the host, not what a binary was linked with.
		if dynamicELF(src) {
			return nil, fmt.Errorf("image %s: %s is dynamically linked (build with CGO_ENABLED=0)", spec.Name, src)
		}
		fi, err := os.Stat(src)
		if err != nil {
			return nil, err
		}
		if err := b.hostFile(c.Dst, src, tarMode(fi.Mode())); err != nil {
			return nil, fmt.Errorf("image %s: COPY %s: %w", spec.Name, c.Dst, err)
		}
	}
	if w := spec.WorkingDir; w != "" && w != "/" && b.layers.get(w) == nil {
		// A builder creates the WORKDIR.
		if err := b.dir(w, 0o755, 0, 0); err != nil {
			return nil, fmt.Errorf("image %s: WORKDIR %s: %w", spec.Name, w, err)
		}
	}
	for _, l := range spec.Links {
		if err := b.symlink(l.Path, l.Target); err != nil {
			return nil, fmt.Errorf("image %s: ln -s %s %s: %w", spec.Name, l.Target, l.Path, err)
		}
	}
	var layers []tree
	for _, t := range b.layers {
		if len(t) > 0 {
			layers = append(layers, t)
		}
	}
	return layers, ctx.Err()
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// dynamicELF reports whether file is an ELF executable that needs a dynamic loader.
func dynamicELF(file string) bool {
	f, err := elf.Open(file)
	if err != nil {
		return false
	}
	defer f.Close()
	return slices.ContainsFunc(f.Progs, func(p *elf.Prog) bool { return p.Type == elf.PT_INTERP })
}

// inputKey hashes everything the archive holds: its references, its configuration and every layer's entries
// with their content digests.
func inputKey(refs []string, cfg v1.ConfigFile, layers []tree) (string, error) {
	h := sha256.New()
	w := bufio.NewWriter(h)
	fmt.Fprintln(w, archiveFormat)
	sorted := slices.Clone(refs)
	sort.Strings(sorted)
	fmt.Fprintln(w, strings.Join(sorted, " "))
	c, err := json.Marshal(cfg)
	if err != nil {
		return "", err
	}
	fmt.Fprintf(w, "%s\n", c)
	for i, t := range layers {
		fmt.Fprintf(w, "layer %d\n", i)
		t.writeHash(w)
	}
	if err := w.Flush(); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// write writes the image to path atomically: layers and archive go to a temporary folder beside it, and the
// archive is renamed into place only when complete, so a reader never sees half an archive.
func write(ctx context.Context, path string, tags []name.Tag, cfg v1.ConfigFile, trees []tree) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(path), ".assemble-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	layers := make([]v1.Layer, 0, len(trees))
	for i, t := range trees {
		if err := ctx.Err(); err != nil {
			return err
		}
		p := filepath.Join(tmp, fmt.Sprintf("layer-%d.tar.gz", i))
		if err := writeFile(p, t.writeTarGz); err != nil {
			return fmt.Errorf("layer %d: %w", i, err)
		}
		l, err := tarball.LayerFromFile(p)
		if err != nil {
			return fmt.Errorf("layer %d: %w", i, err)
		}
		layers = append(layers, l)
	}
	img, err := mutate.ConfigFile(empty.Image, &cfg)
	if err != nil {
		return err
	}
	if img, err = mutate.AppendLayers(img, layers...); err != nil {
		return err
	}
	refs := map[name.Reference]v1.Image{}
	for _, t := range tags {
		refs[t] = img
	}
	archive := filepath.Join(tmp, "archive.tar")
	if err := tarball.MultiRefWriteToFile(archive, refs); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return os.Rename(archive, path)
}

func writeFile(p string, fill func(io.Writer) error) error {
	f, err := os.Create(p)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	if err := fill(w); err != nil {
		f.Close()
		return err
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
