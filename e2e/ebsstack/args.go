package ebsstack

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/stowage-csi/stowage/e2e/rendered"
)

// Every process's args and env come from the stowage-ebs chart rendered with its default values (and
// snapshot-controller from its kustomize base), through e2e/rendered: what the stack runs is what a user
// installs, and a flag the chart passes that a binary rejects fails the stack's start. What differs is named
// here: what a process outside a Pod needs (podless*) and, unless Options.UpstreamArgs, the few test-only
// settings (testOnly*).

// sidecarContainers names each sidecar's container in the renders.
var sidecarContainers = map[string][2]string{
	"csi-provisioner":     {rendered.EBS, "Deployment/ebs-csi-controller/csi-provisioner"},
	"csi-attacher":        {rendered.EBS, "Deployment/ebs-csi-controller/csi-attacher"},
	"csi-resizer":         {rendered.EBS, "Deployment/ebs-csi-controller/csi-resizer"},
	"csi-snapshotter":     {rendered.EBS, "Deployment/ebs-csi-controller/csi-snapshotter"},
	"snapshot-controller": {rendered.SnapshotController, "Deployment/snapshot-controller/snapshot-controller"},
}

// testOnlySidecarFlags: the sidecars retry a failed object after 500 ms, at most every 30 s (the chart: up to
// 30 min, 5 min for csi-attacher), and csi-attacher gives up a call after 60 s (the chart: 6 min), so that
// runs with faults and kills converge in minutes.
func testOnlySidecarFlags(name string) map[string]string {
	flags := map[string]string{"retry-interval-start": "500ms", "retry-interval-max": "30s"}
	if name == "csi-attacher" {
		flags["timeout"] = "60s"
	}
	return flags
}

// testOnlyPluginFlags: ebs-plugin logs at level 4 (the chart: 2), for the log tails of a failing test.
var testOnlyPluginFlags = map[string]string{"v": "4"}

// sidecarProcess is the command line and environment of a sidecar: its container, with the controller's
// socket for the Pod's ($(ADDRESS)), its ServiceAccount's kubeconfig and the lease in kube-system (in a Pod:
// the in-cluster configuration and the Pod's namespace).
func (s *Stack) sidecarProcess(name string) (args, env []string, err error) {
	ref, ok := sidecarContainers[name]
	if !ok {
		return nil, nil, fmt.Errorf("no rendered container for %s", name)
	}
	c, err := rendered.Get(ref[0], ref[1])
	if err != nil {
		return nil, nil, err
	}
	o := rendered.Outside{
		Add:    []string{"--kubeconfig=" + s.Kubeconfigs[name], "--leader-election-namespace=" + rbacNamespace},
		AddEnv: baseEnv(),
	}
	if slices.ContainsFunc(c.Env, func(e rendered.EnvVar) bool { return e.Name == "ADDRESS" }) {
		o.Env = map[string]string{"ADDRESS": "unix://" + s.ControllerSocket}
	}
	if !s.upstreamArgs {
		o.Flags, o.Add = overrides(c, testOnlySidecarFlags(name), o.Add)
	}
	return c.Process(o)
}

// startSidecar starts a sidecar with its rendered container's args and env (sidecarProcess), after the
// binary has parsed them (rendered.CheckFlags): a sidecar serves no socket to wait for, so a flag it
// rejected would otherwise show only as a test waiting for work that never comes.
func (s *Stack) startSidecar(ctx context.Context, name, bin string) (*Process, error) {
	args, env, err := s.sidecarProcess(name)
	if err != nil {
		return nil, err
	}
	if err := rendered.CheckFlags(ctx, bin, args, env); err != nil {
		return nil, err
	}
	return s.start(name, bin, args, env)
}

// overrides splits flags into those the container passes (replaced) and those it does not (appended to add).
func overrides(c rendered.Container, flags map[string]string, add []string) (map[string]string, []string) {
	replace := map[string]string{}
	for _, name := range slices.Sorted(maps.Keys(flags)) { // sorted: the same command line every run
		if slices.ContainsFunc(c.Args, func(a string) bool { return strings.HasPrefix(a, "--"+name+"=") }) {
			replace[name] = flags[name]
		} else {
			add = append(add, "--"+name+"="+flags[name])
		}
	}
	return replace, add
}

// SidecarArgs are the args the stack runs a sidecar with (sidecarProcess), for printing how to run one
// elsewhere. On an error (a sidecar not in the renders) they hold it as a flag that no binary accepts.
func (s *Stack) SidecarArgs(name string) []string {
	args, _, err := s.sidecarProcess(name)
	if err != nil {
		return []string{"--rendered-args-error=" + err.Error()}
	}
	return args
}

// controllerProcess is ebs-plugin controller's command line and environment: its container with the
// stack's socket, the emulator's EC2 endpoint (a ConfigMap in the chart) and static credentials (the
// aws-secret); the Pod's node name is not needed outside a Pod. The stack's cluster ID tags volumes.
func (s *Stack) controllerProcess() (args, env []string, err error) {
	c, err := rendered.Get(rendered.EBS, "Deployment/ebs-csi-controller/ebs-plugin")
	if err != nil {
		return nil, nil, err
	}
	o := rendered.Outside{
		Env: map[string]string{
			"CSI_ENDPOINT": "unix://" + s.ControllerSocket, "AWS_EC2_ENDPOINT": s.EC2.URL(),
			"AWS_ACCESS_KEY_ID": "AKIDSTOWAGEE2E", "AWS_SECRET_ACCESS_KEY": "stowage-e2e-secret",
		},
		Drop:   []string{"CSI_NODE_NAME"},
		Add:    []string{"--k8s-tag-cluster-id=" + ClusterID},
		AddEnv: s.awsEnv(""),
	}
	if !s.upstreamArgs {
		o.Flags = testOnlyPluginFlags
	}
	return c.Process(o)
}

// nodeProcess is a node's ebs-plugin: its container with the node's socket and name, the instance metadata
// from the emulator (IMDS, as on EC2), the emulator's device links and the node's kubeconfig.
func (s *Stack) nodeProcess(spec NodeSpec, sock string) (args, env []string, err error) {
	c, err := rendered.Get(rendered.EBS, "DaemonSet/ebs-csi-node/ebs-plugin")
	if err != nil {
		return nil, nil, err
	}
	o := rendered.Outside{
		Env:    map[string]string{"CSI_ENDPOINT": "unix://" + sock, "CSI_NODE_NAME": spec.Name},
		Add:    []string{"--metadata-sources=imds", "--device-link-dir=" + s.linkDir, "--kubeconfig=" + s.Kubeconfigs["ebs-csi-node-sa"]},
		AddEnv: append(s.awsEnv(spec.InstanceID), "AWS_EC2_ENDPOINT="+s.EC2.URL()),
	}
	if !s.upstreamArgs {
		o.Flags = testOnlyPluginFlags
	}
	return c.Process(o)
}

// SidecarEnv is the env the stack runs a sidecar with beyond this machine's PATH (the rendered container's,
// e.g. ENABLE_VAC_FALLBACK), for printing how to run one elsewhere; nil on an error (see SidecarArgs).
func (s *Stack) SidecarEnv(name string) []string {
	_, env, err := s.sidecarProcess(name)
	if err != nil {
		return nil
	}
	return slices.DeleteFunc(env, func(e string) bool { return slices.Contains(baseEnv(), e) })
}
