package rig

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// Command names a command of a repository module: ./cmd/<Name> of folder <Module>. As, when set, is the
// file name it is built under (an image's name for it, such as s3-fuse as mount-s3).
type Command struct{ Module, Name, As string }

// RunWithCommands is a TestMain body for packages whose tests run Stowage binaries: it builds cmds into a
// fresh directory that every user may read and search (tests run some binaries as uid 1000, as in their
// Pods), sets *paths[i] to the path of cmds[i], runs the tests and removes the directory. A failed build
// ends the run with status 1 and the reason on stderr.
func RunWithCommands(m *testing.M, cmds []Command, paths ...*string) int {
	if len(cmds) != len(paths) {
		fmt.Fprintln(os.Stderr, "rig.RunWithCommands: one path per command")
		return 1
	}
	dir, err := buildAll(cmds, paths)
	if dir != "" {
		defer os.RemoveAll(dir)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

func buildAll(cmds []Command, paths []*string) (string, error) {
	dir, err := os.MkdirTemp("", "stowage-bin-")
	if err != nil {
		return "", err
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return dir, err
	}
	root, err := RepoRoot(".")
	if err != nil {
		return dir, err
	}
	for i, c := range cmds {
		out := filepath.Join(dir, c.Module)
		if err := os.MkdirAll(out, 0o755); err != nil {
			return dir, err
		}
		bin, err := BuildCommand(context.Background(), root, c.Module, c.Name, out)
		if err != nil {
			return dir, err
		}
		if c.As != "" {
			renamed := filepath.Join(out, c.As)
			if err := os.Rename(bin, renamed); err != nil {
				return dir, err
			}
			bin = renamed
		}
		*paths[i] = bin
	}
	return dir, nil
}
