package rendered

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestProcess(t *testing.T) {
	c := Container{
		Command: []string{"/bin/x", "sub"},
		Args:    []string{"--csi-address=$(ADDRESS)", "--v=2", "--unknown=$(NOPE)"},
		Env:     []EnvVar{{Name: "ADDRESS", Value: "/csi/csi.sock"}, {Name: "NODE", From: "fieldRef:spec.nodeName"}, {Name: "KEEP", Value: "k"}},
	}
	args, env, err := c.Process(Outside{
		Env: map[string]string{"ADDRESS": "/tmp/s.sock", "NODE": "node-a"}, Flags: map[string]string{"v": "4"},
		Add: []string{"--kubeconfig=/k"}, AddEnv: []string{"PATH=/bin"},
	})
	if err != nil {
		t.Fatal(err)
	}
	wantArgs := []string{"sub", "--csi-address=/tmp/s.sock", "--v=4", "--unknown=$(NOPE)", "--kubeconfig=/k"}
	if !slices.Equal(args, wantArgs) {
		t.Errorf("args %v, want %v", args, wantArgs)
	}
	wantEnv := []string{"ADDRESS=/tmp/s.sock", "NODE=node-a", "KEEP=k", "PATH=/bin"}
	if !slices.Equal(env, wantEnv) {
		t.Errorf("env %v, want %v", env, wantEnv)
	}
	if !slices.Equal(c.Args, []string{"--csi-address=$(ADDRESS)", "--v=2", "--unknown=$(NOPE)"}) {
		t.Errorf("Process changed the container's args: %v", c.Args)
	}
}

func TestProcessRefuses(t *testing.T) {
	c := Container{Args: []string{"--v=2"}, Env: []EnvVar{{Name: "NODE", From: "fieldRef:spec.nodeName"}, {Name: "A", Value: "a"}}}
	for name, tc := range map[string]struct {
		o    Outside
		want string
	}{
		"a Pod's value not given": {Outside{}, "env NODE comes from fieldRef:spec.nodeName"},
		"replace a missing env":   {Outside{Drop: []string{"NODE"}, Env: map[string]string{"B": "b"}}, "env B to replace"},
		"drop a missing env":      {Outside{Drop: []string{"NODE", "B"}}, "env B to drop"},
		"add an env it sets":      {Outside{Drop: []string{"NODE"}, AddEnv: []string{"A=x"}}, "env A to add"},
		"replace a missing flag":  {Outside{Drop: []string{"NODE"}, Flags: map[string]string{"timeout": "1s"}}, "flag --timeout to replace"},
		"add a flag it passes":    {Outside{Drop: []string{"NODE"}, Add: []string{"--v=4"}}, "flag --v to add"},
	} {
		t.Run(name, func(t *testing.T) {
			_, _, err := c.Process(tc.o)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// TestRendersHoldTheStacksContainers: every container the stacks take is in containers.json.
func TestRendersHoldTheStacksContainers(t *testing.T) {
	for render, containers := range map[string][]string{
		EBS: {"Deployment/ebs-csi-controller/ebs-plugin", "Deployment/ebs-csi-controller/csi-provisioner", "Deployment/ebs-csi-controller/csi-attacher",
			"Deployment/ebs-csi-controller/csi-resizer", "Deployment/ebs-csi-controller/csi-snapshotter", "DaemonSet/ebs-csi-node/ebs-plugin"},
		S3:                 {"Deployment/s3-csi-controller/s3-csi-controller", "DaemonSet/s3-csi-node/s3-plugin"},
		S3Provisioner:      {"Deployment/s3-csi-controller/s3-csi-controller", "Deployment/s3-csi-controller/csi-provisioner"},
		SnapshotController: {"Deployment/snapshot-controller/snapshot-controller"},
	} {
		for _, c := range containers {
			if _, err := Get(render, c); err != nil {
				t.Error(err)
			}
		}
	}
}

// TestCheckFlags: a binary that rejects a flag fails CheckFlags with its message; one that accepts passes.
func TestCheckFlags(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "bin")
	script := "#!/bin/sh\nfor a in \"$@\"; do case \"$a\" in --version) ;; --ok*) ;; *) echo \"unknown flag $a\" >&2; exit 2;; esac; done\n"
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := CheckFlags(context.Background(), bin, []string{"--ok=1"}, nil); err != nil {
		t.Errorf("accepted flags: %v", err)
	}
	err := CheckFlags(context.Background(), bin, []string{"--ok=1", "--bad=2"}, nil)
	if err == nil || !strings.Contains(err.Error(), "unknown flag --bad=2") {
		t.Errorf("a rejected flag: %v, want the binary's message", err)
	}
}
