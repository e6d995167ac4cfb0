// Package ebsstack runs the EBS storage stack end to end on real parts and walks volumes through their life.
//
// Start brings up, on this machine: the control plane (package cluster), the EC2 emulator (ec2sim) with
// one local instance per node, ebs-plugin in controller mode with csi-provisioner and csi-attacher, and per
// node an ebs-plugin in node mode (its own socket and instance metadata) with a kubelet simulator
// (kubeletsim). Every Stowage binary runs as its own process under its own ServiceAccount, with the RBAC
// from deploy/rbac. Stop tears it all down and leaves no process, mount or loop device.
//
// Lifecycle holds the scenarios (provision and write; move to another node; xfs and raw block; delete;
// a bad StorageClass parameter; snapshot and restore into another zone). The e2e test (TestE2EEBSLifecycle) and `devcluster demo` run the same
// code; Report prints a line per step with its duration and a summary table.
package ebsstack
