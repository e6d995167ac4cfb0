package images

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path"
	"slices"
	"strings"

	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	"github.com/moby/buildkit/frontend/dockerfile/linter"
	"github.com/moby/buildkit/frontend/dockerfile/parser"
	"github.com/moby/buildkit/frontend/dockerfile/shell"
	"k8s.io/klog/v2"
)

// ErrUnsupported is wrapped by every error about a Dockerfile instruction the assembler cannot reproduce.
var ErrUnsupported = errors.New("the assembler cannot reproduce it")

// buildStage is the stage whose /out/ holds every binary (`go build -o /out/ ./cmd/...`); the assembler
// takes those binaries from `make build`'s output instead of running it.
const (
	buildStage = "build"
	buildOut   = "/out/"
)

// Base is a base image the assembler reproduces from files of its own and of this host.
type Base string

const (
	BaseScratch Base = "scratch"
	// BaseStatic is gcr.io/distroless/static-debian12: users and groups, /tmp, CA certificates.
	BaseStatic Base = "distroless-static"
	// BaseNonroot is BaseStatic's :nonroot tag: the same files, running as 65532 in /home/nonroot.
	BaseNonroot Base = "distroless-nonroot"
	// BaseDebian is debian:12-slim as far as what is installed on it needs: the merged-/usr layout, users,
	// /tmp and /bin/sh (busybox). Packages installed with apt-get are copied from this host (Debian 12).
	BaseDebian Base = "debian-slim"
	// BaseBusybox is a busybox image: Debian's static busybox with a link per applet in /bin.
	BaseBusybox Base = "busybox"
)

// knownBases maps what a FROM may name, after ARG expansion and without a digest, to the base it means.
var knownBases = map[string]Base{
	"scratch":                                   BaseScratch,
	"gcr.io/distroless/static-debian12":         BaseStatic,
	"gcr.io/distroless/static-debian12:latest":  BaseStatic,
	"gcr.io/distroless/static-debian12:nonroot": BaseNonroot,
	"debian:12-slim":                            BaseDebian,
	"debian:bookworm-slim":                      BaseDebian,
}

// Spec is what one final stage of the Dockerfile puts in its image, with what it inherits.
type Spec struct {
	Name     string   // the stage's name: the image's name in images.tsv
	Base     Base     // the image the stage chain starts from
	Packages []string // apt-get install on a Debian base, in order
	Copies   []Copy   // COPY --from=build /out/<Bin> <Dst>, in order
	Links    []Link   // RUN ln -s, in order
	// The image's configuration: the base's, changed by the stages' instructions as a builder would.
	Entrypoint []string
	Cmd        []string
	Env        []string // KEY=VALUE
	User       string
	WorkingDir string
}

// Copy is one binary of the build stage copied into the image.
type Copy struct {
	Bin string // the file name under /out/ (and under make build's bin/)
	Dst string // absolute path in the image
}

// Link is one symbolic link.
type Link struct {
	Path   string // absolute path in the image
	Target string // as written
}

// Dockerfile is a Dockerfile parsed by BuildKit's own parser, with its global ARG defaults.
type Dockerfile struct {
	file     string // for messages
	data     []byte
	stages   []instructions.Stage
	metaArgs map[string]string
	escape   rune
}

// ReadDockerfile reads and parses the Dockerfile at file with its ARG defaults (no --build-arg).
func ReadDockerfile(file string) (*Dockerfile, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	return ParseDockerfile(file, data)
}

// ParseDockerfile parses data (named file in messages).
func ParseDockerfile(file string, data []byte) (*Dockerfile, error) {
	res, err := parser.Parse(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", file, err)
	}
	lint := linter.New(&linter.Config{Warn: func(rule, desc, _, msg string, loc []parser.Range) {
		klog.V(2).InfoS("Dockerfile lint", "file", file, "line", line(loc), "rule", rule, "message", msg)
	}})
	stages, metaArgs, err := instructions.Parse(res.AST, lint)
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", file, err)
	}
	d := &Dockerfile{file: file, data: data, stages: stages, metaArgs: map[string]string{}, escape: res.EscapeToken}
	lex := shell.NewLex(d.escape)
	for _, a := range metaArgs {
		for _, kv := range a.Args {
			if kv.Value == nil {
				d.metaArgs[kv.Key] = ""
				continue
			}
			v, _, err := lex.ProcessWord(*kv.Value, envGetter(d.metaArgs))
			if err != nil {
				return nil, fmt.Errorf("%s:%d: ARG %s: %w", file, line(a.Location()), kv.Key, err)
			}
			d.metaArgs[kv.Key] = v
		}
	}
	return d, nil
}

func line(loc []parser.Range) int {
	if len(loc) == 0 {
		return 0
	}
	return loc[0].Start.Line
}

// envGetter adapts a map to what BuildKit's shell lexer expands words from.
func envGetter(m map[string]string) shell.EnvGetter {
	env := make([]string, 0, len(m))
	for k, v := range m {
		env = append(env, k+"="+v)
	}
	return shell.EnvsFromSlice(env)
}

// Spec derives the image the stage target builds. It fails on any instruction the assembler cannot
// reproduce, naming it, rather than assemble an image that differs from what a builder would make.
func (d *Dockerfile) Spec(target string) (*Spec, error) {
	// Expanding variables rewrites BuildKit's commands in place: each derivation starts from a fresh parse,
	// so deriving twice, or a stage that is another's base, never expands a word twice.
	fresh, err := ParseDockerfile(d.file, d.data)
	if err != nil {
		return nil, err
	}
	return fresh.spec(target, nil)
}

func (d *Dockerfile) spec(target string, chain []string) (*Spec, error) {
	if slices.Contains(chain, target) {
		return nil, fmt.Errorf("%s: stage %s is its own base (%s)", d.file, target, strings.Join(chain, " -> "))
	}
	i := slices.IndexFunc(d.stages, func(s instructions.Stage) bool { return strings.EqualFold(s.Name, target) })
	if i < 0 {
		return nil, fmt.Errorf("%s: no stage named %s", d.file, target)
	}
	st := &d.stages[i]
	lex := shell.NewLex(d.escape)
	from, _, err := lex.ProcessWord(st.BaseName, envGetter(d.metaArgs))
	if err != nil {
		return nil, fmt.Errorf("%s:%d: %s: %w", d.file, line(st.Location), st.SourceCode, err)
	}
	if st.Platform != "" {
		return nil, d.unsupported(st.Location, st.SourceCode, "--platform")
	}
	var s *Spec
	if slices.ContainsFunc(d.stages[:i], func(p instructions.Stage) bool { return strings.EqualFold(p.Name, from) }) {
		if s, err = d.spec(from, append(chain, target)); err != nil {
			return nil, err
		}
	} else {
		ref, _, _ := strings.Cut(from, "@") // a digest pins the same content the assembler reproduces
		b, ok := knownBases[ref]
		if !ok {
			return nil, d.unsupported(st.Location, st.SourceCode, "unknown base image "+from)
		}
		s = baseSpec(b)
	}
	s.Name = st.Name
	if err := d.apply(s, st); err != nil {
		return nil, err
	}
	return s, nil
}

func (d *Dockerfile) unsupported(loc []parser.Range, code, why string) error {
	return fmt.Errorf("%s:%d: %s: %w (%s)", d.file, line(loc), code, ErrUnsupported, why)
}

// apply runs the stage's instructions on s, as a builder would on the image config.
func (d *Dockerfile) apply(s *Spec, st *instructions.Stage) error {
	lex := shell.NewLex(d.escape)
	args := map[string]string{} // ARGs declared in this stage
	cmdSet := false
	for _, cmd := range st.Commands {
		code := fmt.Sprint(cmd)
		if c, ok := cmd.(instructions.SupportsSingleWordExpansion); ok {
			scope := map[string]string{}
			for k, v := range args {
				scope[k] = v
			}
			for _, kv := range s.Env {
				k, v, _ := strings.Cut(kv, "=")
				scope[k] = v
			}
			err := c.Expand(func(w string) (string, error) {
				r, _, err := lex.ProcessWord(w, envGetter(scope))
				return r, err
			})
			if err != nil {
				return fmt.Errorf("%s:%d: %s: %w", d.file, line(cmd.Location()), code, err)
			}
		}
		bad := func(why string) error { return d.unsupported(cmd.Location(), code, why) }
		switch c := cmd.(type) {
		case *instructions.ArgCommand:
			for _, kv := range c.Args {
				switch {
				case kv.Value != nil:
					args[kv.Key] = *kv.Value
				default:
					args[kv.Key] = d.metaArgs[kv.Key]
				}
			}
		case *instructions.EnvCommand:
			for _, kv := range c.Env {
				s.setEnv(kv.Key, kv.Value)
			}
		case *instructions.UserCommand:
			s.User = c.User
		case *instructions.WorkdirCommand:
			s.WorkingDir = path.Join(orRoot(s.WorkingDir), c.Path)
			if path.IsAbs(c.Path) {
				s.WorkingDir = path.Clean(c.Path)
			}
		case *instructions.EntrypointCommand:
			s.Entrypoint = commandLine(c.ShellDependantCmdLine)
			// A builder keeps the base's CMD only if this stage set one: an ENTRYPOINT resets the inherited CMD.
			if !cmdSet {
				s.Cmd = nil
			}
		case *instructions.CmdCommand:
			s.Cmd = commandLine(c.ShellDependantCmdLine)
			cmdSet = true
		case *instructions.CopyCommand:
			if err := s.copy(c, bad); err != nil {
				return err
			}
		case *instructions.RunCommand:
			if err := s.run(c, lex, bad); err != nil {
				return err
			}
		default:
			return bad("no equivalent in the assembler")
		}
	}
	return nil
}

func orRoot(dir string) string {
	if dir == "" {
		return "/"
	}
	return dir
}

// commandLine is an ENTRYPOINT's or CMD's argv: the exec form as written, the shell form through /bin/sh -c.
func commandLine(c instructions.ShellDependantCmdLine) []string {
	if c.PrependShell {
		return []string{"/bin/sh", "-c", strings.Join(c.CmdLine, " ")}
	}
	return slices.Clone(c.CmdLine)
}

func (s *Spec) setEnv(k, v string) {
	for i, kv := range s.Env {
		if name, _, _ := strings.Cut(kv, "="); name == k {
			s.Env[i] = k + "=" + v
			return
		}
	}
	s.Env = append(s.Env, k+"="+v)
}

// copy records a COPY of build-stage binaries; anything else a COPY can do is refused.
func (s *Spec) copy(c *instructions.CopyCommand, bad func(string) error) error {
	switch {
	case c.From != buildStage:
		return bad("COPY only from the " + buildStage + " stage's " + buildOut)
	case c.Chown != "":
		return bad("--chown")
	case c.Chmod != "":
		return bad("--chmod")
	case len(c.ExcludePatterns) > 0:
		return bad("--exclude")
	case c.Parents:
		return bad("--parents")
	case len(c.SourceContents) > 0:
		return bad("here-document sources")
	}
	dst := c.DestPath
	if !path.IsAbs(dst) {
		dst = path.Join(orRoot(s.WorkingDir), dst)
	}
	intoDir := strings.HasSuffix(c.DestPath, "/")
	if len(c.SourcePaths) > 1 && !intoDir {
		return bad("several sources need a destination ending in /")
	}
	for _, src := range c.SourcePaths {
		bin, ok := strings.CutPrefix(path.Clean(src), buildOut)
		if !ok || bin == "" || strings.ContainsAny(bin, "/*?[\\") {
			return bad("source " + src + " is not one file directly under " + buildOut)
		}
		to := dst
		if intoDir {
			to = path.Join(dst, bin)
		}
		s.Copies = append(s.Copies, Copy{Bin: bin, Dst: path.Clean(to)})
	}
	return nil
}

// baseSpec is the configuration each base image ships with.
func baseSpec(b Base) *Spec {
	const pathEnv = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	s := &Spec{Base: b}
	switch b {
	case BaseStatic:
		s.Env = []string{pathEnv, "SSL_CERT_FILE=" + caBundle}
		s.User, s.WorkingDir = "0", "/"
	case BaseNonroot:
		s.Env = []string{pathEnv, "SSL_CERT_FILE=" + caBundle}
		s.User, s.WorkingDir = "65532", "/home/nonroot"
	case BaseDebian:
		s.Env = []string{pathEnv}
		s.Cmd = []string{"bash"}
	case BaseBusybox:
		s.Env = []string{pathEnv}
		s.Cmd = []string{"sh"}
	}
	return s
}
