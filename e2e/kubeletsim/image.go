package kubeletsim

import (
	v1 "k8s.io/api/core/v1"
)

// Image is a container image the node can run: the files it holds, taken from the host.
type Image struct {
	// Files maps a path inside the container to the host file bind-mounted there read-only, e.g.
	// "/bin/aws-s3-csi-mounter" -> a freshly built s3-mounter.
	Files map[string]string
	// Entrypoint is the command run when a container gives no command of its own.
	Entrypoint []string
}

// runsContainers tells whether the node runs the Pod's containers: all of them use an image it knows, and
// there are no init containers (which it does not run). Other Pods are only given their volumes.
func (n *Node) runsContainers(pod *v1.Pod) bool {
	if len(n.cfg.Images) == 0 || len(pod.Spec.Containers) == 0 || len(pod.Spec.InitContainers) > 0 {
		return false
	}
	for _, c := range pod.Spec.Containers {
		if _, ok := n.cfg.Images[c.Image]; !ok {
			return false
		}
	}
	return true
}
