package kubeletsim

import (
	"fmt"
	"path"
	"path/filepath"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// sandboxFor turns a container of a Pod into the sandbox that runs it: its image's files, its volume
// mounts, its user, groups, command, environment and working directory.
func (n *Node) sandboxFor(pod *v1.Pod, c v1.Container) (*sandbox, error) {
	where := fmt.Sprintf("container %s of pod %s/%s", c.Name, pod.Namespace, pod.Name)
	img, ok := n.cfg.Images[c.Image]
	if !ok {
		return nil, fmt.Errorf("%s: image %s is not known to node %s", where, c.Image, n.cfg.NodeName)
	}
	argv := append(append([]string(nil), c.Command...), c.Args...)
	if len(c.Command) == 0 {
		argv = append(append([]string(nil), img.Entrypoint...), c.Args...)
	}
	if len(argv) == 0 {
		return nil, fmt.Errorf("%s: no command, and image %s has no entrypoint", where, c.Image)
	}
	sb := &sandbox{
		rootfs:  filepath.Join(n.paths.podDir(pod.UID), "containers", c.Name, "rootfs"),
		workDir: "/",
		argv:    argv,
	}
	if c.WorkingDir != "" {
		sb.workDir = c.WorkingDir
	}
	for inside, host := range img.Files {
		if err := checkMountPath(inside); err != nil {
			return nil, fmt.Errorf("image %s: file: %w", c.Image, err)
		}
		sb.mounts = append(sb.mounts, sandboxMount{host: host, container: path.Clean(inside), readOnly: true, file: true})
	}
	mounts, err := n.volumeMounts(pod, c)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	sb.mounts = append(sb.mounts, mounts...)
	sb.uid, sb.gid = identity(pod, c)
	if sc := pod.Spec.SecurityContext; sc != nil {
		if sc.FSGroup != nil {
			sb.groups = append(sb.groups, *sc.FSGroup)
		}
		sb.groups = append(sb.groups, sc.SupplementalGroups...)
	}
	if sb.env, err = containerEnv(pod, c); err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	return sb, nil
}

// identity is the container's uid and gid: its securityContext over the Pod's, uid 0 (the image's user
// here) when unset, and the gid defaulting to the uid as in a runtime that finds no /etc/passwd entry.
func identity(pod *v1.Pod, c v1.Container) (uid, gid int64) {
	var u, g *int64
	if sc := pod.Spec.SecurityContext; sc != nil {
		u, g = sc.RunAsUser, sc.RunAsGroup
	}
	if sc := c.SecurityContext; sc != nil {
		if sc.RunAsUser != nil {
			u = sc.RunAsUser
		}
		if sc.RunAsGroup != nil {
			g = sc.RunAsGroup
		}
	}
	if u != nil {
		uid = *u
	}
	gid = uid
	if g != nil {
		gid = *g
	}
	return uid, gid
}

// volumeMounts are the host directories behind the container's volumeMounts: emptyDirs, published CSI
// file-system volumes and hostPaths. Mounts of other volume types (the projected API access token...) are
// left out: the node does not write their content.
func (n *Node) volumeMounts(pod *v1.Pod, c v1.Container) ([]sandboxMount, error) {
	var out []sandboxMount
	for _, vm := range c.VolumeMounts {
		var host string
		for _, vol := range pod.Spec.Volumes {
			if vol.Name != vm.Name {
				continue
			}
			switch {
			case vol.EmptyDir != nil:
				host = n.paths.emptyDirPath(pod.UID, vol.Name)
			case vol.HostPath != nil:
				host = vol.HostPath.Path
			default:
				if ps := n.state.pod(pod.Namespace + "/" + pod.Name); ps != nil {
					for _, pv := range n.state.snapshot(ps) {
						if pv.vol.podVolume == vol.Name && pv.published && !pv.vol.block {
							host = pv.target
						}
					}
				}
			}
		}
		if host == "" {
			n.log.V(2).Info("Volume mount left out: its volume type is not supported", "pod", pod.Namespace+"/"+pod.Name, "container", c.Name, "volume", vm.Name)
			continue
		}
		if err := checkMountPath(vm.MountPath); err != nil {
			return nil, fmt.Errorf("volumeMount %s: %w", vm.Name, err)
		}
		if vm.SubPath != "" {
			if path.IsAbs(vm.SubPath) || strings.HasPrefix(path.Clean(vm.SubPath), "..") {
				return nil, fmt.Errorf("volumeMount %s: subPath %q must be a relative path inside the volume", vm.Name, vm.SubPath)
			}
			host = filepath.Join(host, vm.SubPath)
		}
		out = append(out, sandboxMount{host: host, container: path.Clean(vm.MountPath), readOnly: vm.ReadOnly})
	}
	return out, nil
}

// containerEnv is exactly the environment the container declares, plus PATH and HOSTNAME as a runtime adds
// them. Values from the downward API are resolved for the Pod's own fields; other sources are refused.
func containerEnv(pod *v1.Pod, c v1.Container) ([]string, error) {
	env := []string{"HOSTNAME=" + pod.Name}
	hasPath := false
	for _, e := range c.Env {
		val := e.Value
		if src := e.ValueFrom; src != nil {
			if src.FieldRef == nil {
				return nil, fmt.Errorf("env %s: only literal values and fieldRef are supported", e.Name)
			}
			switch src.FieldRef.FieldPath {
			case "metadata.name":
				val = pod.Name
			case "metadata.namespace":
				val = pod.Namespace
			case "metadata.uid":
				val = string(pod.UID)
			case "spec.nodeName":
				val = pod.Spec.NodeName
			case "spec.serviceAccountName":
				val = pod.Spec.ServiceAccountName
			default:
				return nil, fmt.Errorf("env %s: fieldRef %s is not supported", e.Name, src.FieldRef.FieldPath)
			}
		}
		hasPath = hasPath || e.Name == "PATH"
		env = append(env, e.Name+"="+val)
	}
	if !hasPath {
		env = append([]string{"PATH=" + defaultPath}, env...)
	}
	return env, nil
}
