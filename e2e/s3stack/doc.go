// Package s3stack runs the whole S3 CSI driver on this machine from real parts, the way a cluster runs it:
// a real control plane with kube-scheduler, a real S3 server (versitygw), the driver's CRD, CSIDriver,
// namespace, priority class and RBAC from deploy/, s3-controller under its own ServiceAccount, and per node
// an s3-node process (root, as the privileged DaemonSet Pod) with a kubelet simulator that publishes the
// workloads' volumes through it and runs the Mountpoint Pods the controller creates as sandboxed processes
// of an unprivileged user: s3-mounter, which serves the FUSE fd the node hands it with s3-fuse.
//
// The end-to-end tests of the S3 driver and the demo's S3 scenario use it.
package s3stack
