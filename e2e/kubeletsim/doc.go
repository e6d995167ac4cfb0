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
//     when the plugin has VOLUME_MOUNT_GROUP and fsGroupPolicy is File, else a recursive group change as the
//     kubelet does), then sets the Pod Running;
//   - on graceful Pod deletion (deletionTimestamp set) calls NodeUnpublishVolume, NodeUnstageVolume once no
//     other Pod on the node uses the volume, removes it from volumesInUse, and finishes the deletion (delete
//     with grace period 0 and the Pod's UID as precondition);
//   - calls NodeExpandVolume when a mounted claim waits for file-system expansion (FileSystemResizePending
//     or allocatedResourceStatuses NodeResizePending) and records the new capacity in the claim's status.
//
// It talks to the node plugin only over the plugin's CSI socket. Stop unpublishes and unstages everything it
// published and then unmounts anything still mounted under RootDir, so no mount outlives it.
//
// Differences from a real kubelet, on purpose: no containers run (a Pod is Running once its volumes are
// published); it uses the client it is given (the tests pass an admin client) instead of node credentials;
// block volumes get no global-map bind mount or loop-device lock, only the publish and the pod's symlink;
// volumesAttached is written by the attach-detach controller, as in a real cluster, and only read here.
package kubeletsim
