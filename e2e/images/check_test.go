package images

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestCheckFailsWhenTheArchiveAndTheDockerfileDisagree checks archives against specs they were not made
// from: each difference must be reported by name.
func TestCheckFailsWhenTheArchiveAndTheDockerfileDisagree(t *testing.T) {
	as := assembleStandIns(t, t.TempDir(), standInBinDir(t), "csi-attacher", "s3-mounter")
	attacher, mounter := archiveNamed(t, as, "csi-attacher"), archiveNamed(t, as, "s3-mounter")

	// A Dockerfile whose csi-attacher stage has another ENTRYPOINT.
	src, err := os.ReadFile(filepath.Join(repoRoot(t), "deploy", "images", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(string(src), `ENTRYPOINT ["/csi-attacher"]`, `ENTRYPOINT ["/csi-attacher", "--v=5"]`, 1)
	d, err := ParseDockerfile("Dockerfile", []byte(edited))
	if err != nil {
		t.Fatal(err)
	}
	otherEntrypoint, err := d.Spec("csi-attacher")
	if err != nil {
		t.Fatal(err)
	}

	edit := func(a Archive, f func(*Spec)) *Spec {
		s := *a.Spec
		s.Copies, s.Links, s.Env = slices.Clone(s.Copies), slices.Clone(s.Links), slices.Clone(s.Env)
		f(&s)
		return &s
	}
	tests := []struct {
		name string
		a    Archive
		spec *Spec
		want string
	}{
		{"another entrypoint", attacher, otherEntrypoint, `entrypoint ["/csi-attacher"], want ["/csi-attacher" "--v=5"]`},
		{"a missing COPY", attacher, edit(attacher, func(s *Spec) { s.Copies = append(s.Copies, Copy{"x", "/bin/x"}) }), "COPY destination /bin/x: missing"},
		{"a COPY onto a folder", mounter, edit(mounter, func(s *Spec) { s.Copies = append(s.Copies, Copy{"x", "/mountpoint-s3/bin"}) }), "COPY destination /mountpoint-s3/bin: a directory"},
		{"a missing symlink", attacher, edit(attacher, func(s *Spec) { s.Links = append(s.Links, Link{"/bin/y", "x"}) }), "symlink /bin/y: missing"},
		{"another user", mounter, edit(mounter, func(s *Spec) { s.User = "65532:65532" }), `user "1000:1000", want "65532:65532"`},
		{"another env", mounter, edit(mounter, func(s *Spec) { s.Env = s.Env[:2] }), "env "},
		{"another workdir", attacher, edit(attacher, func(s *Spec) { s.WorkingDir = "/work" }), `working directory "/", want "/work"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckImage(tc.a.Path, tc.a.Refs[0], tc.spec)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("CheckImage: %v, want it to report %s", err, tc.want)
			}
		})
	}
	if err := attacher.Check(); err != nil {
		t.Errorf("the unedited spec: %v", err)
	}
}
