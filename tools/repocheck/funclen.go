package main

import (
	"context"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
)

// MaxFuncLines is the longest a production function may be, from its signature to its closing brace. A longer
// one does several steps that read better as functions named for them.
const MaxFuncLines = 80

// LongFunctions returns the production functions under root over MaxFuncLines lines: those of the Go files git
// tracks, outside e2e/ (the tests and their rig), test files and generated code (the standard "Code generated
// ... DO NOT EDIT." line) left out.
func LongFunctions(ctx context.Context, root string) ([]Finding, error) {
	paths, err := Tracked(ctx, root)
	if err != nil {
		return nil, err
	}
	var findings []Finding
	for _, p := range paths {
		if !isProductionGo(p) {
			continue
		}
		long, err := longFunctionsIn(filepath.Join(root, p))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		for _, fn := range long {
			findings = append(findings, Finding{Path: fmt.Sprintf("%s:%d", p, fn.line),
				Reason: fmt.Sprintf("function %s is %d lines, over the %d-line limit for production code: split it along its steps", fn.name, fn.lines, MaxFuncLines)})
		}
	}
	return findings, nil
}

// isProductionGo reports whether the tracked path is a Go file of production code.
func isProductionGo(p string) bool {
	return strings.HasSuffix(p, ".go") && !strings.HasSuffix(p, "_test.go") && !strings.HasPrefix(p, "e2e/") &&
		!strings.Contains("/"+p, "/testdata/")
}

// longFunction is one function over the limit.
type longFunction struct {
	name        string
	line, lines int
}

// longFunctionsIn parses one file and returns its functions over MaxFuncLines; a generated file has none.
func longFunctionsIn(path string) ([]longFunction, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.ParseComments|parser.SkipObjectResolution)
	if err != nil {
		if _, statErr := os.Stat(path); statErr != nil {
			return nil, statErr
		}
		return nil, fmt.Errorf("parsing %s: %w", path, err)
	}
	if ast.IsGenerated(f) {
		return nil, nil
	}
	var out []longFunction
	for _, decl := range f.Decls {
		fn, ok := decl.(*ast.FuncDecl)
		if !ok || fn.Body == nil {
			continue
		}
		start, end := fset.Position(fn.Pos()).Line, fset.Position(fn.End()).Line
		if n := end - start + 1; n > MaxFuncLines {
			out = append(out, longFunction{name: fn.Name.Name, line: start, lines: n})
		}
	}
	return out, nil
}
