package main

// Build outputs must never be committed: a compiled binary in git makes every clone download it forever (one
// 100 MB ebs-plugin binary once did), so Check fails on any tracked file larger than MaxSize and on any tracked
// ELF file, whatever its size.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// MaxSize is the largest file the repository may track. The biggest legitimate files are go.sum files of the
// nested tools modules (under 40 KiB); 1 MiB leaves room for test data and stops any binary.
const MaxSize = 1 << 20

// elfMagic starts every ELF file: what `go build` writes on Linux.
var elfMagic = []byte("\x7fELF")

// Finding is a tracked file that must not be.
type Finding struct {
	Path   string
	Reason string
}

func (f Finding) String() string { return f.Path + ": " + f.Reason }

// Tracked lists the files git tracks in the work tree at root.
func Tracked(ctx context.Context, root string) ([]string, error) {
	cmd := exec.CommandContext(ctx, "git", "-C", root, "ls-files", "-z")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("git ls-files in %s: %w: %s", root, err, strings.TrimSpace(stderr.String()))
	}
	var paths []string
	for p := range strings.SplitSeq(string(out), "\x00") {
		if p != "" {
			paths = append(paths, p)
		}
	}
	return paths, nil
}

// Check returns the tracked files under root that are over MaxSize or are ELF binaries. A tracked file that
// was deleted from the work tree is skipped: it is the deletion that is being committed.
func Check(ctx context.Context, root string) ([]Finding, error) {
	paths, err := Tracked(ctx, root)
	if err != nil {
		return nil, err
	}
	var findings []Finding
	for _, p := range paths {
		f, err := inspect(filepath.Join(root, p))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if f != "" {
			findings = append(findings, Finding{Path: p, Reason: f})
		}
	}
	return findings, nil
}

// inspect says what is wrong with one file, or "".
func inspect(path string) (string, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return "", err
	}
	if !fi.Mode().IsRegular() {
		return "", nil // symlinks and submodules hold no content of their own
	}
	if fi.Size() > MaxSize {
		return fmt.Sprintf("%d bytes, over the %d-byte limit for tracked files", fi.Size(), MaxSize), nil
	}
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	head := make([]byte, len(elfMagic))
	if _, err := io.ReadFull(f, head); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return "", nil // shorter than the magic: not ELF
		}
		return "", err
	}
	if bytes.Equal(head, elfMagic) {
		return "an ELF binary (a build output; add it to .gitignore)", nil
	}
	return "", nil
}
