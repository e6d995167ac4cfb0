package images

import (
	"path"
	"regexp"
	"strings"

	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	"github.com/moby/buildkit/frontend/dockerfile/shell"
)

// run records what a RUN does, for the few commands the assembler reproduces: `ln -s TARGET LINK`, and on a
// Debian base `apt-get update`, `apt-get install PACKAGES` and `rm -rf /var/lib/apt/lists/*`, joined by &&.
// Anything else (a pipe, a redirection, a variable, another program) is refused.
func (s *Spec) run(c *instructions.RunCommand, lex *shell.Lex, bad func(string) error) error {
	if len(c.FlagsUsed) > 0 {
		return bad("RUN --" + strings.Join(c.FlagsUsed, ", --"))
	}
	if len(c.Files) > 0 {
		return bad("here-documents")
	}
	var cmds [][]string
	if c.PrependShell {
		script := strings.Join(c.CmdLine, " ")
		if strings.ContainsAny(strings.ReplaceAll(script, "&&", ""), ";|&<>$`(){}\n") {
			return bad("shell syntax other than &&")
		}
		words, err := lex.ProcessWords(script, shell.EnvsFromSlice(nil))
		if err != nil {
			return bad(err.Error())
		}
		var cur []string
		for _, w := range append(words, "&&") {
			if w != "&&" {
				cur = append(cur, w)
				continue
			}
			if len(cur) == 0 {
				return bad("an empty command")
			}
			cmds, cur = append(cmds, cur), nil
		}
	} else {
		cmds = [][]string{c.CmdLine}
	}
	for _, argv := range cmds {
		if err := s.runOne(argv, bad); err != nil {
			return err
		}
	}
	return nil
}

var (
	envAssignment = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)
	packageName   = regexp.MustCompile(`^[a-z0-9][a-z0-9+.-]+$`)
)

func (s *Spec) runOne(argv []string, bad func(string) error) error {
	for len(argv) > 0 && envAssignment.MatchString(argv[0]) {
		argv = argv[1:] // DEBIAN_FRONTEND=noninteractive: no effect on what is installed
	}
	if len(argv) == 0 {
		return bad("an empty command")
	}
	cmd := strings.Join(argv, " ")
	switch argv[0] {
	case "ln":
		return s.link(argv[1:], bad)
	case "apt-get":
		if s.Base != BaseDebian {
			return bad(cmd + ": apt-get only on a Debian base")
		}
		if len(argv) == 2 && (argv[1] == "update" || argv[1] == "clean") {
			return nil
		}
		if len(argv) < 2 || argv[1] != "install" {
			return bad(cmd + ": only apt-get update, clean and install")
		}
		for _, a := range argv[2:] {
			switch {
			case a == "-y" || a == "--yes" || a == "-q" || a == "-qq" || a == "--no-install-recommends":
			case strings.HasPrefix(a, "-"):
				return bad(cmd + ": option " + a)
			case !packageName.MatchString(a):
				return bad(cmd + ": package " + a + " (a version or a pattern cannot be reproduced from the host)")
			default:
				if _, ok := packageFiles[a]; !ok {
					return bad(cmd + ": package " + a + " is not one the assembler copies from the host")
				}
				s.Packages = append(s.Packages, a)
			}
		}
		return nil
	case "rm":
		// apt's package lists: a builder's cache, never part of what is copied from the host.
		if cmd == "rm -rf /var/lib/apt/lists/*" {
			return nil
		}
	}
	return bad(cmd)
}

// link records `ln -s [-f] [-n] TARGET LINK`.
func (s *Spec) link(args []string, bad func(string) error) error {
	symbolic := false
	for len(args) > 0 && strings.HasPrefix(args[0], "-") {
		flags := strings.TrimPrefix(args[0], "-")
		if flags == "" || strings.Trim(flags, "sfn") != "" {
			return bad("ln option " + args[0])
		}
		symbolic = symbolic || strings.Contains(flags, "s")
		args = args[1:]
	}
	if !symbolic {
		return bad("ln without -s (a hard link)")
	}
	if len(args) != 2 || strings.HasSuffix(args[1], "/") {
		return bad("ln -s takes exactly a target and a link path")
	}
	p := args[1]
	if !path.IsAbs(p) {
		p = path.Join(orRoot(s.WorkingDir), p)
	}
	s.Links = append(s.Links, Link{Path: path.Clean(p), Target: args[0]})
	return nil
}
