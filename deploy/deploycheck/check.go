package deploycheck

import (
	"fmt"
	"path"
	"regexp"
	"slices"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Pod is a workload's pod template, named for messages.
type Pod struct {
	Name string // Kind/namespace/name of the workload
	Spec corev1.PodSpec
}

// Pods returns the pod templates of the Deployments and DaemonSets among objs, decoded strictly into the
// typed API (an unknown or misplaced field is an error, as the API server's strict field validation).
func Pods(objs []*unstructured.Unstructured) ([]Pod, error) {
	var pods []Pod
	for _, o := range objs {
		name := o.GetKind() + "/" + o.GetNamespace() + "/" + o.GetName()
		switch o.GetKind() {
		case "Deployment":
			var d appsv1.Deployment
			if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(o.Object, &d, true); err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			pods = append(pods, Pod{name, d.Spec.Template.Spec})
		case "DaemonSet":
			var d appsv1.DaemonSet
			if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(o.Object, &d, true); err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			pods = append(pods, Pod{name, d.Spec.Template.Spec})
		}
	}
	return pods, nil
}

var envRef = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// expandEnv resolves $(VAR) from the container's literal env, as the kubelet does for args.
func expandEnv(s string, c corev1.Container) string {
	return envRef.ReplaceAllStringFunc(s, func(m string) string {
		name := m[2 : len(m)-1]
		for _, e := range c.Env {
			if e.Name == name && e.ValueFrom == nil {
				return e.Value
			}
		}
		return m
	})
}

// Flag returns the expanded value of --name=value in c's args (or command), and whether it is there.
func Flag(c corev1.Container, name string) (string, bool) {
	for _, a := range append(slices.Clone(c.Command), c.Args...) {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return expandEnv(v, c), true
		}
	}
	return "", false
}

// location names where a path inside container c really is: "emptyDir:<volume>/<rest>" or "host:<path>", by
// the longest mount that holds it; "" if no mount holds it (the container's own file system).
func location(pod corev1.PodSpec, c corev1.Container, p string) string {
	p = path.Clean(p)
	var best *corev1.VolumeMount
	for i, m := range c.VolumeMounts {
		mp := path.Clean(m.MountPath)
		if (p == mp || strings.HasPrefix(p, mp+"/")) && (best == nil || len(mp) > len(path.Clean(best.MountPath))) {
			best = &c.VolumeMounts[i]
		}
	}
	if best == nil {
		return ""
	}
	rest := strings.TrimPrefix(strings.TrimPrefix(p, path.Clean(best.MountPath)), "/")
	for _, v := range pod.Volumes {
		if v.Name != best.Name {
			continue
		}
		switch {
		case v.HostPath != nil:
			return "host:" + path.Join(v.HostPath.Path, rest)
		case v.EmptyDir != nil:
			return "emptyDir:" + path.Join(v.Name, rest)
		default:
			return "volume:" + path.Join(v.Name, rest)
		}
	}
	return ""
}

// socketPath turns a CSI endpoint (unix:///abs, unix:/abs, /abs) into a path.
func socketPath(endpoint string) string {
	if p, ok := strings.CutPrefix(endpoint, "unix://"); ok {
		if !strings.HasPrefix(p, "/") {
			p = "/" + p // unix://tmp/csi.sock is /tmp/csi.sock, as the drivers read it
		}
		return p
	}
	return strings.TrimPrefix(endpoint, "unix:")
}

// CheckPod checks one pod template: mounts name volumes, every --csi-address reaches the socket the plugin
// container (the one with --endpoint, or s3-controller's --csi-endpoint) serves, the registrar registers the plugin's socket by its host path,
// probes name ports the container declares, names and ports are unique, and every args $(VAR) resolves.
func CheckPod(p Pod) []error {
	var errs []error
	fail := func(format string, a ...any) { errs = append(errs, fmt.Errorf(p.Name+": "+format, a...)) }
	spec := p.Spec
	volumes := map[string]bool{}
	for _, v := range spec.Volumes {
		volumes[v.Name] = true
	}
	used := map[string]bool{}
	names := map[string]bool{}
	ports := map[int32]string{}
	var plugin *corev1.Container
	socket := ""
	for i, c := range spec.Containers {
		if names[c.Name] {
			fail("two containers named %s", c.Name)
		}
		names[c.Name] = true
		for _, m := range c.VolumeMounts {
			used[m.Name] = true
			if !volumes[m.Name] {
				fail("container %s mounts %s, which is no volume of the pod", c.Name, m.Name)
			}
		}
		for _, a := range append(slices.Clone(c.Command), c.Args...) {
			if ref := envRef.FindString(expandEnv(a, c)); ref != "" {
				fail("container %s: %s in %q is no literal env of the container", c.Name, ref, a)
			}
		}
		if c.Image == "" {
			fail("container %s has no image", c.Name)
		}
		for _, cp := range c.Ports {
			if other, ok := ports[cp.ContainerPort]; ok {
				fail("port %d of container %s is also %s's", cp.ContainerPort, c.Name, other)
			}
			ports[cp.ContainerPort] = c.Name
		}
		checkProbePorts(c, fail)
		ep, ok := Flag(c, "endpoint")
		if !ok {
			ep, ok = Flag(c, "csi-endpoint") // s3-controller's CSI controller service (dynamic provisioning)
		}
		if ok {
			if plugin != nil {
				fail("two containers serve CSI (--endpoint or --csi-endpoint): %s and %s", plugin.Name, c.Name)
			}
			plugin = &spec.Containers[i]
			socket = location(spec, c, socketPath(ep))
			if !strings.HasPrefix(socket, "emptyDir:") && !strings.HasPrefix(socket, "host:") {
				fail("container %s serves CSI at %s, which is on no shared volume", c.Name, ep)
			}
		}
	}
	for name := range volumes {
		if !used[name] {
			fail("volume %s is mounted by no container", name)
		}
	}
	checkCSIAddresses(spec, plugin, socket, fail)
	return errs
}

// checkProbePorts checks that each probe of c that names a port names one c declares.
func checkProbePorts(c corev1.Container, fail func(string, ...any)) {
	for kind, probe := range map[string]*corev1.Probe{"liveness": c.LivenessProbe, "readiness": c.ReadinessProbe, "startup": c.StartupProbe} {
		if probe == nil {
			continue
		}
		var port *intstr.IntOrString
		switch {
		case probe.HTTPGet != nil:
			port = &probe.HTTPGet.Port
		case probe.TCPSocket != nil:
			port = &probe.TCPSocket.Port
		}
		if port != nil && !declares(c, *port) {
			fail("container %s: the %s probe's port %s is not a port the container declares", c.Name, kind, port.String())
		}
	}
}

// checkCSIAddresses checks that every --csi-address of spec's containers reaches socket, the one plugin
// serves, and that a registrar registers that socket by its host path.
func checkCSIAddresses(spec corev1.PodSpec, plugin *corev1.Container, socket string, fail func(string, ...any)) {
	for _, c := range spec.Containers {
		addr, ok := Flag(c, "csi-address")
		if !ok {
			continue
		}
		if plugin == nil {
			fail("container %s dials %s, but no container serves CSI (--endpoint or --csi-endpoint)", c.Name, addr)
			continue
		}
		if got := location(spec, c, socketPath(addr)); got != socket {
			fail("container %s dials --csi-address=%s, which is %q; %s serves %q", c.Name, addr, got, plugin.Name, socket)
		}
		if reg, ok := Flag(c, "kubelet-registration-path"); ok && "host:"+path.Clean(reg) != socket {
			fail("container %s registers %s with the kubelet; the plugin's socket is %q", c.Name, reg, socket)
		}
	}
}

func declares(c corev1.Container, port intstr.IntOrString) bool {
	for _, cp := range c.Ports {
		if (port.Type == intstr.String && cp.Name == port.StrVal) || (port.Type == intstr.Int && cp.ContainerPort == port.IntVal) {
			return true
		}
	}
	return false
}

// Roles is what RBAC a set of objects defines and binds.
type Roles struct {
	ServiceAccounts map[string]bool                // namespace/name
	Rules           map[string][]rbacv1.PolicyRule // Kind/namespace/name of a Role or ClusterRole
	Bound           map[string]map[string]bool     // namespace/name of a ServiceAccount -> Kind/namespace/name of its roles
}

func roleKey(kind, namespace, name string) string {
	if kind == "ClusterRole" {
		namespace = ""
	}
	return kind + "/" + namespace + "/" + name
}

// RolesOf collects the ServiceAccounts, roles and bindings among objs.
func RolesOf(objs []*unstructured.Unstructured) (Roles, error) {
	r := Roles{ServiceAccounts: map[string]bool{}, Rules: map[string][]rbacv1.PolicyRule{}, Bound: map[string]map[string]bool{}}
	for _, o := range objs {
		switch o.GetKind() {
		case "ServiceAccount":
			r.ServiceAccounts[o.GetNamespace()+"/"+o.GetName()] = true
		case "Role", "ClusterRole":
			var role rbacv1.ClusterRole // a Role's fields are a subset
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &role); err != nil {
				return r, err
			}
			r.Rules[roleKey(o.GetKind(), o.GetNamespace(), o.GetName())] = role.Rules
		case "RoleBinding", "ClusterRoleBinding":
			var b rbacv1.RoleBinding
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &b); err != nil {
				return r, err
			}
			for _, s := range b.Subjects {
				if s.Kind != "ServiceAccount" {
					continue
				}
				sa := s.Namespace + "/" + s.Name
				if r.Bound[sa] == nil {
					r.Bound[sa] = map[string]bool{}
				}
				r.Bound[sa][roleKey(b.RoleRef.Kind, o.GetNamespace(), b.RoleRef.Name)] = true
			}
		}
	}
	return r, nil
}

// RulesOf returns the rules granted to a ServiceAccount, each role's rules in one string, sorted: a
// comparison of what two sets of objects grant, whatever the roles are called.
func (r Roles) RulesOf(sa string) []string {
	var out []string
	for role := range r.Bound[sa] {
		rules, ok := r.Rules[role]
		if !ok {
			out = append(out, "missing role "+role)
			continue
		}
		for _, rule := range rules {
			out = append(out, ruleString(role, rule))
		}
	}
	sort.Strings(out)
	return out
}

func ruleString(role string, rule rbacv1.PolicyRule) string {
	scope := "cluster"
	if strings.HasPrefix(role, "Role/") {
		scope = "ns " + strings.Split(role, "/")[1]
	}
	verbs := slices.Clone(rule.Verbs)
	sort.Strings(verbs)
	return fmt.Sprintf("%s %v %v %v %v", scope, rule.APIGroups, rule.Resources, rule.ResourceNames, verbs)
}
