// Package node runs real Kubernetes nodes on this machine for the e2e rig: the kubelet and kube-proxy of the
// control plane's release, containerd v2 with Debian's runc, and the CNI bridge plugins, all built from their
// Go modules by e2e/tools and cached.
//
// Each node's containerd and kubelet run in a PID and mount namespace of their own (unshare), with the
// kubelet's root at /var/lib/kubelet inside it: a bind mount of a per-run directory, shared so Bidirectional
// mounts of CSI node plugins propagate. The places the kubelet, containerd and the CNI plugins write outside
// their roots (/run, /var/log, /var/lib, the host sysctls the kubelet sets) are private to the namespace, so a
// node leaves nothing on the host: its processes, mounts and network namespaces end with the namespace, and
// Stop removes its cgroups and state. The nodes share the host's network namespace; their Pods hang off one
// bridge of the rig's (Network) with an address range per node, and one kube-proxy serves the Services for all
// of them, because they share the host's netfilter tables.
//
// What these machines need for it (no systemd, cgroup v1, CAP_SYS_RESOURCE withheld, a host PID 1 that
// refuses nsenter, no image registry) is handled here; each workaround says why where it is made.
package node
