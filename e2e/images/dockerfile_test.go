package images

import (
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestSpecDerivesEachImageOfTheRepositoryDockerfile(t *testing.T) {
	d := readRepoDockerfile(t)
	const pathEnv = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	tests := []Spec{
		{
			Name: "csi-attacher", Base: BaseStatic, Copies: []Copy{{"csi-attacher", "/csi-attacher"}},
			Entrypoint: []string{"/csi-attacher"}, Env: []string{pathEnv, "SSL_CERT_FILE=" + caBundle}, User: "0", WorkingDir: "/",
		},
		{
			Name: "snapshot-controller", Base: BaseNonroot, Copies: []Copy{{"snapshot-controller", "/snapshot-controller"}},
			Entrypoint: []string{"/snapshot-controller"}, Env: []string{pathEnv, "SSL_CERT_FILE=" + caBundle},
			User: "65532:65532", WorkingDir: "/home/nonroot",
		},
		{
			// FROM node-tools, which is FROM debian:12-slim: the ENTRYPOINT drops debian's CMD ["bash"].
			Name: "ebs-plugin", Base: BaseDebian, Packages: []string{"ca-certificates", "e2fsprogs", "xfsprogs", "util-linux", "mount"},
			Copies: []Copy{{"ebs-plugin", "/bin/ebs-plugin"}}, Links: []Link{{"/bin/aws-ebs-csi-driver", "ebs-plugin"}},
			Entrypoint: []string{"/bin/ebs-plugin"}, Env: []string{pathEnv},
		},
		{
			Name: "s3-mounter", Base: BaseNonroot,
			Copies: []Copy{
				{"s3-mounter", "/bin/aws-s3-csi-mounter"}, {"s3-mounter", "/bin/s3-mounter"}, {"s3-fuse", "/mountpoint-s3/bin/mount-s3"},
			},
			Entrypoint: []string{"/bin/aws-s3-csi-mounter"},
			Env:        []string{pathEnv, "SSL_CERT_FILE=" + caBundle, "MOUNTPOINT_BIN_DIR=/mountpoint-s3/bin"},
			User:       "1000:1000", WorkingDir: "/home/nonroot",
		},
	}
	for _, want := range tests {
		t.Run(want.Name, func(t *testing.T) {
			got, err := d.Spec(want.Name)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(*got, want) {
				t.Errorf("Spec(%s):\n got %+v\nwant %+v", want.Name, *got, want)
			}
		})
	}
}

func TestSpecOfEveryImageInTheTable(t *testing.T) {
	d := readRepoDockerfile(t)
	table, err := ReadImageTable(filepath.Join(repoRoot(t), "deploy", "images", "images.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range table {
		s, err := d.Spec(e.Image)
		if err != nil {
			t.Errorf("%s: %v", e.Image, err)
			continue
		}
		if len(s.Copies) == 0 || len(s.Entrypoint) == 0 {
			t.Errorf("%s: no binary or no entrypoint: %+v", e.Image, s)
		}
	}
}

// TestSpecFailsNamingAnInstructionItCannotReproduce: an image the assembler would make differently from a
// builder is an error that names the instruction and its line, never a silently skipped instruction.
func TestSpecFailsNamingAnInstructionItCannotReproduce(t *testing.T) {
	tests := []struct{ name, stage, want string }{
		{"a program", "RUN make", "RUN make"},
		{"shell syntax", "RUN ln -s a /b; rm /c", "RUN ln -s a /b; rm /c"},
		{"a variable", "RUN ln -s $X /b", "RUN ln -s $X /b"},
		{"a hard link", "RUN ln a /b", "RUN ln a /b"},
		{"a run mount", "RUN --mount=type=cache,target=/c ln -s a /b", "RUN --mount=type=cache,target=/c ln -s a /b"},
		{"apt-get on distroless", "RUN apt-get install -y curl", "apt-get only on a Debian base"},
		{"ADD", "ADD x /x", "ADD x /x"},
		{"COPY from the context", "COPY x /x", "COPY x /x"},
		{"COPY --chmod", "COPY --chmod=700 --from=build /out/a /a", "--chmod"},
		{"COPY of a folder", "COPY --from=build /out/a/b /a", "not one file directly under /out/"},
		{"EXPOSE", "EXPOSE 80", "EXPOSE 80"},
		{"HEALTHCHECK", "HEALTHCHECK CMD /a", "HEALTHCHECK CMD /a"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := "FROM golang AS build\nRUN go build -o /out/ ./...\n\nFROM gcr.io/distroless/static-debian12 AS img\n" +
				tc.stage + "\nENTRYPOINT [\"/a\"]\n"
			d, err := ParseDockerfile("Dockerfile", []byte(src))
			if err != nil {
				t.Fatal(err)
			}
			_, err = d.Spec("img")
			if !errors.Is(err, ErrUnsupported) {
				t.Fatalf("Spec: %v, want an ErrUnsupported", err)
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "Dockerfile:5:") {
				t.Errorf("Spec: %v, want it to name %q at Dockerfile:5", err, tc.want)
			}
		})
	}
}

func TestSpecRefusesAnUnknownBaseAndPackage(t *testing.T) {
	for _, src := range []string{
		"FROM alpine:3 AS img\nENTRYPOINT [\"/a\"]\n",
		"FROM debian:12-slim AS img\nRUN apt-get update && apt-get install -y curl\n",
		"FROM debian:12-slim AS img\nRUN apt-get install -y mount=2.38\n",
	} {
		d, err := ParseDockerfile("Dockerfile", []byte(src))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := d.Spec("img"); !errors.Is(err, ErrUnsupported) {
			t.Errorf("%q: Spec: %v, want an ErrUnsupported", src, err)
		}
	}
}

func TestSpecExpandsArgsAndKeepsACmdSetInTheStage(t *testing.T) {
	src := `ARG BASE=gcr.io/distroless/static-debian12
ARG DIR=/opt
FROM ${BASE} AS img
ARG DIR
ENV A=1 B=$DIR/x
WORKDIR $DIR
COPY --from=build /out/a /out/b bin/
CMD ["-v"]
ENTRYPOINT /opt/bin/a
RUN ln -sf a bin/c
`
	d, err := ParseDockerfile("Dockerfile", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	s, err := d.Spec("img")
	if err != nil {
		t.Fatal(err)
	}
	want := &Spec{
		Name: "img", Base: BaseStatic,
		Copies:     []Copy{{"a", "/opt/bin/a"}, {"b", "/opt/bin/b"}},
		Links:      []Link{{"/opt/bin/c", "a"}},
		Entrypoint: []string{"/bin/sh", "-c", "/opt/bin/a"}, Cmd: []string{"-v"},
		Env:  []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "SSL_CERT_FILE=" + caBundle, "A=1", "B=/opt/x"},
		User: "0", WorkingDir: "/opt",
	}
	if !reflect.DeepEqual(s, want) {
		t.Errorf("Spec:\n got %+v\nwant %+v", s, want)
	}
}

// TestSpecTwiceExpandsOnce: BuildKit expands words in place, so a second derivation must not expand an
// escaped $ that the first one produced.
func TestSpecTwiceExpandsOnce(t *testing.T) {
	src := "FROM scratch AS base\nENV A=\\$HOME\nFROM base AS img\nENTRYPOINT [\"/a\"]\n"
	d, err := ParseDockerfile("Dockerfile", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		for _, stage := range []string{"base", "img"} {
			s, err := d.Spec(stage)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(s.Env, []string{"A=$HOME"}) {
				t.Errorf("derivation %d of %s: env %q, want A=$HOME", i+1, stage, s.Env)
			}
		}
	}
}
