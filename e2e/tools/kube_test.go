package tools

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	"golang.org/x/mod/semver"

	"github.com/stowage-csi/stowage/e2e/rig"
)

// TestKubeToolsReplaceEveryStagingModule checks the rule that makes k8s.io/kubernetes buildable as a
// dependency: each staging module it requires (k8s.io/<x> at v0.0.0 in its own go.mod) is replaced by the
// published k8s.io/<x> release matching the Kubernetes version, v1.N.P -> v0.N.P.
func TestKubeToolsReplaceEveryStagingModule(t *testing.T) {
	root, err := rig.RepoRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, "e2e", "tools", "kube", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	if err := checkStagingReplaces(data); err != nil {
		t.Error(err)
	}
}

func TestCheckStagingReplaces(t *testing.T) {
	const head = "module example.com/tools\n\ngo 1.26.0\n\nrequire k8s.io/kubernetes v1.36.3\n"
	tests := []struct {
		name    string
		gomod   string
		wantErr string
	}{
		{
			name:  "every staging module replaced",
			gomod: head + "require (\n\tk8s.io/api v0.0.0\n\tk8s.io/klog/v2 v2.140.0\n)\nreplace k8s.io/api => k8s.io/api v0.36.3\n",
		},
		{
			name:    "staging module left at v0.0.0",
			gomod:   head + "require k8s.io/api v0.0.0\n",
			wantErr: "k8s.io/api",
		},
		{
			name:    "replaced by another version",
			gomod:   head + "require k8s.io/api v0.0.0\nreplace k8s.io/api => k8s.io/api v0.35.0\n",
			wantErr: "v0.35.0",
		},
		{
			name:    "replaced by a local path",
			gomod:   head + "require k8s.io/api v0.0.0\nreplace k8s.io/api => ./staging/src/k8s.io/api\n",
			wantErr: "./staging",
		},
		{
			name:    "no kubernetes",
			gomod:   "module example.com/tools\n",
			wantErr: "k8s.io/kubernetes",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := checkStagingReplaces([]byte(tt.gomod))
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("unexpected error: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("error = %v, want one mentioning %q", err, tt.wantErr)
			}
		})
	}
}

// checkStagingReplaces verifies a tools go.mod replaces every k8s.io module it requires at a staging-style
// version (v0.x.y) with the published release v0.N.P of its Kubernetes version v1.N.P, and that every
// k8s.io replace points there.
func checkStagingReplaces(gomod []byte) error {
	f, err := modfile.Parse("go.mod", gomod, nil)
	if err != nil {
		return err
	}
	kube, err := RequiredVersion(gomod, "k8s.io/kubernetes")
	if err != nil {
		return err
	}
	want := "v0" + strings.TrimPrefix(kube, "v1")
	replaced := map[string]string{}
	var problems []string
	for _, r := range f.Replace {
		if !strings.HasPrefix(r.Old.Path, "k8s.io/") {
			continue
		}
		got := r.New.Path + " " + r.New.Version
		if r.Old.Version != "" || r.New.Path != r.Old.Path || r.New.Version != want {
			problems = append(problems, r.Old.Path+" => "+got+", want "+r.Old.Path+" "+want)
		}
		replaced[r.Old.Path] = r.New.Version
	}
	for _, r := range f.Require {
		p, v := r.Mod.Path, r.Mod.Version
		// Staging modules carry plain v0.x.y versions; k8s.io/utils and kube-openapi pseudo-versions.
		if !strings.HasPrefix(p, "k8s.io/") || semver.Major(v) != "v0" || module.IsPseudoVersion(v) {
			continue
		}
		if _, ok := replaced[p]; !ok {
			problems = append(problems, p+" "+v+" is required but not replaced by "+p+" "+want)
		}
	}
	if len(problems) > 0 {
		return &stagingError{problems}
	}
	return nil
}

type stagingError struct{ problems []string }

func (e *stagingError) Error() string { return "staging replaces: " + strings.Join(e.problems, "; ") }
