// Package rendered gives the e2e stacks and the demo each binary's command line and environment from
// deploy/'s charts rendered with their default values, so what the rig runs is what a user installs: a flag a
// chart passes that a binary rejects makes its process exit, and the stack's start fails.
//
// The renders come from containers.json, which deploy/deploycheck generates with Helm and kustomize (this module
// cannot import Helm, which needs another k8s.io version) and fails on when it is stale. A process outside a
// Pod differs from the container in what the Pod gives it (socket paths, the node's name, Secrets, the
// in-cluster configuration): Process names each such difference, and nothing else changes.
package rendered

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

//go:embed containers.json
var containersJSON []byte

// Render names, in containers.json.
const (
	EBS                = "helm/stowage-ebs"              // stowage-ebs, default values
	S3                 = "helm/stowage-s3"               // stowage-s3, default values
	S3Provisioner      = "helm/stowage-s3+provisioner"   // stowage-s3 with sidecars.provisioner.enabled
	SnapshotController = "kustomize/snapshot-controller" // no chart installs it: its kustomize base
)

// Container is what a rendered container runs.
type Container struct {
	Command []string `json:"command,omitempty"`
	Args    []string `json:"args,omitempty"`
	Env     []EnvVar `json:"env,omitempty"`
}

// EnvVar is a literal env var (Value), or one the kubelet fills in a Pod (From: "fieldRef:<path>" or
// "secret:<name>/<key>").
type EnvVar struct {
	Name  string `json:"name"`
	Value string `json:"value,omitempty"`
	From  string `json:"from,omitempty"`
}

type file struct {
	Renders map[string]map[string]Container `json:"renders"`
}

// Get returns container ("Kind/workload/container", e.g. "Deployment/ebs-csi-controller/csi-provisioner") of
// render.
func Get(render, container string) (Container, error) {
	var f file
	if err := json.Unmarshal(containersJSON, &f); err != nil {
		return Container{}, fmt.Errorf("e2e/rendered/containers.json: %w", err)
	}
	r, ok := f.Renders[render]
	if !ok {
		return Container{}, fmt.Errorf("e2e/rendered/containers.json has no render %q", render)
	}
	c, ok := r[container]
	if !ok {
		return Container{}, fmt.Errorf("render %s has no container %s", render, container)
	}
	return c, nil
}

// Outside is how a process outside a Pod differs from its container. Each field says why in its caller's
// code; Process refuses what would silently do nothing.
type Outside struct {
	// Env replaces the value of the container's env vars: the Pod's paths, fieldRefs and Secrets. Every env
	// var the kubelet would fill (From) must be given here or in Drop.
	Env map[string]string
	// Drop leaves env vars out.
	Drop []string
	// Flags replaces the value of --name=value flags the container passes (name without dashes); a flag the
	// container does not pass is an error (use Add).
	Flags map[string]string
	// Add appends args the container does not pass: what a process needs outside a Pod (a kubeconfig, the
	// lease namespace, the emulators' endpoints). A flag the container already passes is an error (use Flags).
	Add []string
	// AddEnv appends env vars the container does not set ("NAME=value").
	AddEnv []string
}

var envRef = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// Process returns the args (the command's after the binary, then the container's args, with $(VAR)
// expanded as the kubelet does) and env ("NAME=value") of c run outside a Pod as o says.
func (c Container) Process(o Outside) (args, env []string, err error) {
	values := map[string]string{}
	used := map[string]bool{}
	for _, e := range c.Env {
		if slices.Contains(o.Drop, e.Name) {
			used[e.Name] = true
			continue
		}
		v, replaced := o.Env[e.Name]
		if replaced {
			used[e.Name] = true
		} else if e.From != "" {
			return nil, nil, fmt.Errorf("env %s comes from %s in a Pod: give its value (Outside.Env) or drop it", e.Name, e.From)
		} else {
			v = e.Value
		}
		values[e.Name] = v
		env = append(env, e.Name+"="+v)
	}
	for name := range o.Env {
		if !used[name] {
			return nil, nil, fmt.Errorf("env %s to replace is not the container's (use AddEnv)", name)
		}
	}
	for _, name := range o.Drop {
		if !used[name] {
			return nil, nil, fmt.Errorf("env %s to drop is not the container's", name)
		}
	}
	for _, kv := range o.AddEnv {
		name, _, _ := strings.Cut(kv, "=")
		if _, ok := values[name]; ok {
			return nil, nil, fmt.Errorf("env %s to add is the container's (use Env)", name)
		}
		env = append(env, kv)
	}
	if len(c.Command) > 1 {
		args = append(args, c.Command[1:]...)
	}
	args = append(args, c.Args...)
	for i, a := range args {
		args[i] = envRef.ReplaceAllStringFunc(a, func(m string) string {
			if v, ok := values[m[2:len(m)-1]]; ok {
				return v
			}
			return m // the kubelet leaves an unknown reference as written
		})
	}
	for name, v := range o.Flags {
		i := slices.IndexFunc(args, func(a string) bool { return flagName(a) == name })
		if i < 0 {
			return nil, nil, fmt.Errorf("flag --%s to replace is not among the container's args %v (use Add)", name, args)
		}
		args[i] = "--" + name + "=" + v
	}
	for _, a := range o.Add {
		if name := flagName(a); name != "" && slices.ContainsFunc(args, func(b string) bool { return flagName(b) == name }) {
			return nil, nil, fmt.Errorf("flag --%s to add is among the container's args (use Flags)", name)
		}
		args = append(args, a)
	}
	return args, env, nil
}

// flagName is "name" of "--name=value" or "--name", else "".
func flagName(arg string) string {
	name, ok := strings.CutPrefix(arg, "--")
	if !ok {
		return ""
	}
	name, _, _ = strings.Cut(name, "=")
	return name
}
