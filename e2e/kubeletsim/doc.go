// Package kubeletsim plays the storage half of the kubelet for simulated nodes, so end-to-end tests and the
// demo can run CSI node plugins against a real control plane without a real kubelet or container runtime.
//
// For each node it starts (Start), it:
//   - registers the Node (zone and instance-type labels, the controller-managed-attach-detach annotation,
//     a Ready condition, a node Lease it renews) and, from the node plugin's NodeGetInfo, the CSINode entry,
//     the csi.volume.kubernetes.io/nodeid annotation and the topology labels, as plugin registration does;
//   - watches the Pods bound to the node (spec.nodeName) and does what the kubelet's volume manager does for
//     their CSI volumes (PVC-backed and inline csi: volumes), with the kubelet's path layout under RootDir:
//     it reports the volume in node.status.volumesInUse, waits for the attach-detach controller to list it
//     in node.status.volumesAttached and for the VolumeAttachment to be attached (when the CSIDriver
//     requires attachment), calls NodeStageVolume at
//     plugins/kubernetes.io/csi/<driver>/<sha256(volumeHandle)>/globalmount (file systems) or
//     plugins/kubernetes.io/csi/volumeDevices/staging/<pv> (block), and NodePublishVolume at
//     pods/<uid>/volumes/kubernetes.io~csi/<pv>/mount or plugins/kubernetes.io/csi/volumeDevices/publish/<pv>/<uid>
//     (block; the pod's device path pods/<uid>/volumeDevices/kubernetes.io~csi/<pv> is a symlink to it),
//     with the volume context the kubelet sends (pod info when podInfoOnMount, service account tokens when
//     the CSIDriver has tokenRequests, csi.storage.k8s.io/ephemeral), read-only and fsGroup (VolumeMountGroup
//     when the plugin has VOLUME_MOUNT_GROUP, whatever the fsGroupPolicy, else a recursive group change as the
//     kubelet does), then sets the Pod Running;
//   - on graceful Pod deletion (deletionTimestamp set) calls NodeUnpublishVolume, NodeUnstageVolume once no
//     other Pod on the node uses the volume, removes it from volumesInUse, and finishes the deletion (delete
//     with grace period 0 and the Pod's UID as precondition);
//   - runs the containers of Pods whose images are all in Config.Images, as a container runtime would:
//     emptyDir volumes at pods/<uid>/volumes/kubernetes.io~empty-dir/<name> (a tmpfs of sizeLimit for medium
//     Memory, else a directory; mode 0777, and with an fsGroup group-owned by it with the setgid bit); each
//     container as the first process of a new mount and PID namespace, pivot_root'ed into
//     pods/<uid>/containers/<name>/rootfs, which holds read-only binds of the host's /usr, /lib*, /etc (and
//     its /bin, /sbin symlinks), /dev and /sys, a fresh /proc, a /tmp, the image's files and the Pod's
//     volumeMounts (emptyDirs, CSI file-system volumes, hostPaths), with the old root detached so the
//     namespace holds no copy of other host mounts; then as runAsUser/runAsGroup (the group defaults to the
//     user), supplementary groups fsGroup and supplementalGroups, no capabilities and no new privileges, it
//     execs command+args with exactly the container's env plus PATH and HOSTNAME, in workingDir or /. Output
//     goes to pod-logs/<uid>/<container>.log under RootDir (Node.ContainerLog). It restarts containers per
//     restartPolicy with a doubling back-off and writes the Pod status the kubelet writes (phase, conditions,
//     containerStatuses with state, lastState, restartCount); a Succeeded or Failed Pod's volumes are torn
//     down. On deletion it sends SIGTERM, waits the grace period (capped by Config.MaxGracePeriod), sends
//     SIGKILL (which, to a PID namespace's init, ends the whole container), then tears down as above;
//   - calls NodeExpandVolume when a mounted claim waits for file-system expansion (FileSystemResizePending
//     or allocatedResourceStatuses NodeResizePending) and records the new capacity in the claim's status.
//
// It talks to the node plugin only over the plugin's CSI socket. Stop kills every container (SIGKILL after
// a 2-second grace), unpublishes and unstages everything it published and then unmounts anything still
// mounted under RootDir, so no mount or process outlives it.
//
// Differences from a real kubelet, on purpose: only Pods whose images are in Config.Images run (others are
// Running once their volumes are published, and nothing runs); a run Pod shares the host's network, has no
// cgroup limits, seccomp or AppArmor profile, no init containers, probes or image pulls (an image is a set
// of host files bind-mounted over the host's system directories), its root is writable only in /tmp and
// the directories of its mounts, volumes other than emptyDir, CSI and hostPath (the projected API token...)
// are not mounted, and restarts back off from Config.RestartBackoff (1s) to MaxRestartBackoff (10s) instead
// of 10s to 5m and never reset; it uses the client it is given (the tests pass an admin client) instead of
// node credentials; block volumes get no global-map bind mount or loop-device lock, only the publish and the pod's symlink;
// volumesAttached is written by the attach-detach controller, as in a real cluster, and only read here.
package kubeletsim
