package tools

// ExternalSnapshotter is upstream's external-snapshotter: snapshot-controller and csi-snapshotter, the peers of
// Stowage's two snapshotter binaries in the cross-runs and benchmarks.
func ExternalSnapshotter() Module {
	return Module{
		Dir: "external-snapshotter", Name: "external-snapshotter", Requires: "github.com/kubernetes-csi/external-snapshotter/v8",
		Binaries: map[string]string{
			"snapshot-controller": "github.com/kubernetes-csi/external-snapshotter/v8/cmd/snapshot-controller",
			"csi-snapshotter":     "github.com/kubernetes-csi/external-snapshotter/v8/cmd/csi-snapshotter",
		},
	}
}
