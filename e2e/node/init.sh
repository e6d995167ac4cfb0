#!/bin/sh
# PID 1 of one real node's PID and mount namespace (started by e2e/node through unshare): makes the places the
# kubelet, containerd and the CNI plugins write outside their roots private to the node, then runs containerd
# and the kubelet. When this process ends, the kernel ends every process of the namespace, the containers
# included, and the namespace's mounts go with it.
# Environment: STATE (the node's state directory), LOGS, CONTAINERD, CONTAINERD_CONFIG, KUBELET; the
# arguments are the kubelet's.
set -eu

# /run (containerd's state, runc's, the network namespaces), /var/log (Pod logs) and /var/lib (the CNI
# cache) as private tmpfs; the host's stay untouched.
mount -t tmpfs -o mode=755 stowage-node /run
mount -t tmpfs -o mode=755 stowage-node /var/log
mount -t tmpfs -o mode=755 stowage-node /var/lib
mkdir -p /var/lib/kubelet
# The kubelet's root is /var/lib/kubelet, as Kubernetes' e2e framework and the charts assume; shared, so
# mounts a CSI node plugin makes with Bidirectional propagation reach the kubelet and the other containers.
mount --bind "$STATE/kubelet" /var/lib/kubelet
mount --make-rshared /var/lib/kubelet

# The kubelet sets these host sysctls; it finds copies holding its values instead.
for f in vm/overcommit_memory kernel/panic kernel/panic_on_oops; do
	mount --bind "$STATE/sysctl/$(echo "$f" | tr / _)" "/proc/sys/$f"
done

"$CONTAINERD" --config "$CONTAINERD_CONFIG" >>"$LOGS/containerd.log" 2>&1 &
i=0
until [ -S "$STATE/containerd.sock" ]; do
	i=$((i + 1))
	if [ "$i" -gt 600 ]; then
		echo "containerd did not create its socket within 60 s; see $LOGS/containerd.log" >&2
		exit 1
	fi
	sleep 0.1
done
"$KUBELET" "$@" >>"$LOGS/kubelet.log" 2>&1 &
# Either ending ends the node: the rig sees it as NotReady, and Stop tears the namespace down.
wait
