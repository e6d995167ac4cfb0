package images

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"

	"github.com/stowage-csi/stowage/e2e/rig"
	"github.com/stowage-csi/stowage/e2e/tools"
)

// UpstreamRepository is where upstream publishes its sidecar images; the images here take the same names, so
// a chart slot set to upstream's image (image.upstream) runs them as it would run the published ones.
const UpstreamRepository = "registry.k8s.io/sig-storage"

// UpstreamImage is an archive of one upstream sidecar's image, with the repository and tag a chart's image
// values name it by.
type UpstreamImage struct {
	Archive
	// Name is the binary's and the image's last path element (csi-attacher).
	Name            string
	Repository, Tag string
}

// upstreamPeer is one upstream binary the rig builds (package tools) and the module that builds it.
type upstreamPeer struct {
	name   string
	module func() tools.Module
}

// upstreamPeers are the upstream sidecars e2e/tools builds; external-resizer is not among them (its module is
// refused by the module proxy), so its slot has no upstream image here.
var upstreamPeers = []upstreamPeer{
	{"csi-attacher", tools.CSIAttacher},
	{"csi-provisioner", tools.CSIProvisioner},
	{"csi-snapshotter", tools.ExternalSnapshotter},
	{"snapshot-controller", tools.ExternalSnapshotter},
}

// UpstreamNames are the images Upstream can assemble.
func UpstreamNames() []string {
	out := make([]string, len(upstreamPeers))
	for i, p := range upstreamPeers {
		out[i] = p.name
	}
	return out
}

// Upstream writes an archive for each named upstream sidecar (every one of UpstreamNames if none), around
// the binary e2e/tools builds at its pinned version, tagged UpstreamRepository/<name>:<version>. The image is
// upstream's own layout: distroless static with the binary at /<name> as the entrypoint.
func Upstream(ctx context.Context, cacheDir string, names ...string) ([]UpstreamImage, error) {
	if cacheDir == "" {
		return nil, errors.New("images: CacheDir is required")
	}
	for _, n := range names {
		if !slices.Contains(UpstreamNames(), n) {
			return nil, fmt.Errorf("images: no upstream image %s (there are %q)", n, UpstreamNames())
		}
	}
	root, err := rig.RepoRoot(".")
	if err != nil {
		return nil, err
	}
	var out []UpstreamImage
	for _, p := range upstreamPeers {
		if len(names) > 0 && !slices.Contains(names, p.name) {
			continue
		}
		m := p.module()
		version, err := tools.Version(root, m)
		if err != nil {
			return nil, err
		}
		bin, err := tools.Binary(ctx, m, p.name)
		if err != nil {
			return nil, fmt.Errorf("images: upstream %s: %w", p.name, err)
		}
		img, err := upstreamImage(ctx, cacheDir, p.name, version, bin)
		if err != nil {
			return nil, err
		}
		out = append(out, img)
	}
	return out, nil
}

// upstreamImage assembles one upstream image of name around binary.
func upstreamImage(ctx context.Context, cacheDir, name, version, binary string) (UpstreamImage, error) {
	spec := &Spec{
		Name: "upstream-" + name, Base: BaseStatic, Copies: []Copy{{Bin: name, Dst: "/" + name}},
		Entrypoint: []string{"/" + name},
	}
	repo := UpstreamRepository + "/" + name
	source := func(string) (string, error) { return binary, nil }
	a, err := assemble(ctx, spec, []string{repo + ":" + version}, source, filepath.Join(cacheDir, ImageDir))
	if err != nil {
		return UpstreamImage{}, err
	}
	return UpstreamImage{Archive: a, Name: name, Repository: repo, Tag: version}, nil
}
