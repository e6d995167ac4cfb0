package sidecarrig

import "github.com/stowage-csi/stowage/e2e/tools"

// Namespace holds every sidecar's ServiceAccount and Lease in deploy/rbac.
const Namespace = "kube-system"

// Sidecar is one program of the repository that runs as a controller under its own ServiceAccount.
type Sidecar struct {
	// Module and Command name the program: ./cmd/<Command> of the repository module <Module>.
	Module, Command string
	// ServiceAccount is the account deploy/rbac/<RBAC> binds its rules to, in Namespace.
	ServiceAccount, RBAC string
	// Env is the program's whole environment where a Pod spec sets variables it reads; nil inherits the
	// test's.
	Env []string
	// upstream is the e2e/tools module that builds upstream's peer under the same command name; nil when
	// no peer builds there.
	upstream func() tools.Module
}

// Attacher is csi-attacher.
func Attacher() Sidecar {
	return Sidecar{Module: "attacher", Command: "csi-attacher", ServiceAccount: "csi-attacher", RBAC: "csi-attacher.yaml",
		upstream: tools.CSIAttacher}
}

// Provisioner is csi-provisioner; NAMESPACE is what a Pod spec passes down for --enable-capacity.
func Provisioner() Sidecar {
	return Sidecar{Module: "provisioner", Command: "csi-provisioner", ServiceAccount: "csi-provisioner", RBAC: "csi-provisioner.yaml",
		Env: []string{"NAMESPACE=" + Namespace}, upstream: tools.CSIProvisioner}
}

// Resizer is csi-resizer, with ENABLE_VAC_FALLBACK=true as aws-ebs-csi-driver's manifest sets it.
func Resizer() Sidecar {
	return Sidecar{Module: "resizer", Command: "csi-resizer", ServiceAccount: "csi-resizer", RBAC: "csi-resizer.yaml",
		Env: []string{"ENABLE_VAC_FALLBACK=true"}}
}

// CSISnapshotter is the csi-snapshotter sidecar.
func CSISnapshotter() Sidecar {
	return Sidecar{Module: "snapshotter", Command: "csi-snapshotter", ServiceAccount: "csi-snapshotter", RBAC: "csi-snapshotter.yaml",
		upstream: tools.ExternalSnapshotter}
}

// SnapshotController is the snapshot-controller, the cluster-wide half of snapshots.
func SnapshotController() Sidecar {
	return Sidecar{Module: "snapshotter", Command: "snapshot-controller", ServiceAccount: "snapshot-controller",
		RBAC: "snapshot-controller.yaml", upstream: tools.ExternalSnapshotter}
}

// User is who the sidecar writes as in the audit log.
func (s Sidecar) User() string {
	return "system:serviceaccount:" + Namespace + ":" + s.ServiceAccount
}
