// Package deploycheck checks what deploy/ installs without a container builder or a cluster: the images'
// Dockerfile and build context, and every kustomize combination and Helm chart rendered with the same
// libraries kustomize and helm are built from. It is a module of its own, tested with GOWORK=off, because
// helm.sh/helm/v3 requires newer k8s.io modules than the workspace's.
package deploycheck

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// Stage is one FROM of a Dockerfile and what it puts in its image.
type Stage struct {
	Name       string            // the AS name ("" if none)
	From       string            // the base, after ARG expansion: an image or an earlier stage's name
	Copies     []Copy            // COPY instructions, in order
	Links      map[string]string // RUN ln -s TARGET LINK: link path -> target as written
	User       string            // the last USER
	Entrypoint []string          // the last ENTRYPOINT (exec form)
	Env        map[string]string // ENV KEY=VALUE
}

// Copy is one COPY: from another stage (From != "") or from the build context.
type Copy struct {
	From string
	Src  []string
	Dst  string
}

// Dockerfile is a parsed Dockerfile: its global ARG defaults and its stages, in order.
type Dockerfile struct {
	Args   map[string]string
	Stages []*Stage
}

// Stage returns the stage called name, or nil.
func (d *Dockerfile) Stage(name string) *Stage {
	for _, s := range d.Stages {
		if s.Name == name {
			return s
		}
	}
	return nil
}

var varRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)`)

// Expand replaces ${NAME} and $NAME with args[NAME] (unknown names become "").
func Expand(s string, args map[string]string) string {
	return varRef.ReplaceAllStringFunc(s, func(m string) string {
		name := strings.Trim(m, "${}")
		return args[name]
	})
}

// ParseDockerfile reads the instructions this repository's Dockerfile uses: ARG, FROM, COPY, RUN (for ln -s),
// USER, ENV, ENTRYPOINT, WORKDIR; with line continuations and comments. Anything else is an error, so a new
// instruction is a decision to teach the check about it.
func ParseDockerfile(path string) (*Dockerfile, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	d := &Dockerfile{Args: map[string]string{}}
	var cur *Stage
	var logical []string
	var buf strings.Builder
	sc := bufio.NewScanner(strings.NewReader(string(data)))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "#") || (line == "" && buf.Len() == 0) {
			continue
		}
		if cont, ok := strings.CutSuffix(line, "\\"); ok {
			buf.WriteString(cont + " ")
			continue
		}
		buf.WriteString(line)
		logical = append(logical, buf.String())
		buf.Reset()
	}
	for _, l := range logical {
		inst, rest, _ := strings.Cut(l, " ")
		rest = strings.TrimSpace(rest)
		switch strings.ToUpper(inst) {
		case "ARG":
			if cur == nil { // a global ARG: its default is visible to FROM lines
				k, v, _ := strings.Cut(rest, "=")
				d.Args[k] = v
			}
		case "FROM":
			f := strings.Fields(rest)
			cur = &Stage{From: Expand(f[0], d.Args), Links: map[string]string{}, Env: map[string]string{}}
			if len(f) == 3 && strings.EqualFold(f[1], "AS") {
				cur.Name = f[2]
			}
			d.Stages = append(d.Stages, cur)
		case "COPY":
			f := strings.Fields(rest)
			c := Copy{}
			for len(f) > 0 && strings.HasPrefix(f[0], "--") {
				if v, ok := strings.CutPrefix(f[0], "--from="); ok {
					c.From = v
				}
				f = f[1:]
			}
			if len(f) < 2 {
				return nil, fmt.Errorf("%s: COPY needs a source and a destination: %q", path, l)
			}
			c.Src, c.Dst = f[:len(f)-1], f[len(f)-1]
			cur.Copies = append(cur.Copies, c)
		case "RUN":
			f := strings.Fields(rest)
			if len(f) == 4 && f[0] == "ln" && f[1] == "-s" {
				cur.Links[f[3]] = f[2]
			}
		case "USER":
			cur.User = rest
		case "ENV":
			k, v, _ := strings.Cut(rest, "=")
			cur.Env[k] = v
		case "ENTRYPOINT":
			if !strings.HasPrefix(rest, "[") {
				return nil, fmt.Errorf("%s: ENTRYPOINT must be in exec form (the static images have no shell): %q", path, l)
			}
			var ep []string
			for _, p := range strings.Split(strings.Trim(rest, "[]"), ",") {
				ep = append(ep, strings.Trim(strings.TrimSpace(p), `"`))
			}
			cur.Entrypoint = ep
		case "WORKDIR":
		default:
			return nil, fmt.Errorf("%s: instruction %s is not understood by deploycheck: %q", path, inst, l)
		}
	}
	return d, sc.Err()
}

// Files returns the paths an image built from target holds that this repository put there (COPY
// destinations and symlinks, each to what it came from: "build:/out/x" or "-> target"), including its
// ancestors' within the Dockerfile.
func (d *Dockerfile) Files(target string) map[string]string {
	s := d.Stage(target)
	if s == nil {
		return nil
	}
	files := map[string]string{}
	if parent := d.Stage(s.From); parent != nil {
		files = d.Files(parent.Name)
	}
	for _, c := range s.Copies {
		for _, src := range c.Src {
			dst := c.Dst
			if strings.HasSuffix(dst, "/") {
				dst += filepath.Base(src)
			}
			files[dst] = c.From + ":" + src
		}
	}
	for link, to := range s.Links {
		if !strings.HasPrefix(to, "/") {
			to = filepath.Join(filepath.Dir(link), to)
		}
		files[link] = files[to]
	}
	return files
}
