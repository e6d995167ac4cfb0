package images

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestUpstreamImageIsTheBinaryAsEntrypoint assembles an upstream image around a stand-in binary: tagged by
// upstream's repository and the version given, the binary an executable at /<name> that the image starts, on
// the distroless base, and checked as Stowage's images are.
func TestUpstreamImageIsTheBinaryAsEntrypoint(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "csi-attacher")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\necho attacher\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	img, err := upstreamImage(context.Background(), t.TempDir(), "csi-attacher", "v4.13.0", bin)
	if err != nil {
		t.Fatal(err)
	}
	if img.Name != "csi-attacher" || img.Repository != "registry.k8s.io/sig-storage/csi-attacher" || img.Tag != "v4.13.0" {
		t.Errorf("name %q repository %q tag %q", img.Name, img.Repository, img.Tag)
	}
	if len(img.Refs) != 1 || img.Refs[0] != img.Repository+":"+img.Tag {
		t.Errorf("refs %q", img.Refs)
	}
	if got := strings.Join(img.Spec.Entrypoint, " "); got != "/csi-attacher" || img.Spec.Base != BaseStatic {
		t.Errorf("entrypoint %q on %s, want /csi-attacher on %s", got, img.Spec.Base, BaseStatic)
	}
	if err := img.Check(); err != nil {
		t.Error(err)
	}
	fsys := readArchive(t, img.Archive)
	if n := fsys.get("/csi-attacher"); n == nil || n.mode&0o111 == 0 {
		t.Errorf("/csi-attacher: %+v, want an executable", n)
	}
}

// TestUpstreamRefusesAnUnknownImage names the images there are instead of building anything.
func TestUpstreamRefusesAnUnknownImage(t *testing.T) {
	_, err := Upstream(context.Background(), t.TempDir(), "csi-resizer")
	if err == nil || !strings.Contains(err.Error(), "csi-attacher") {
		t.Fatalf("err %v, want one naming the images there are", err)
	}
}
