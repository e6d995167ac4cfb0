package cluster

import (
	"context"
	"maps"

	"github.com/stowage-csi/stowage/e2e/tools"
)

// binaries holds the paths of the control-plane executables.
type binaries struct {
	etcd, apiserver, controllerManager string
}

// ensureBinaries returns the cached control-plane binaries, building those that are missing.
func ensureBinaries(ctx context.Context, repoRoot, cache string) (binaries, error) {
	paths := map[string]string{}
	for _, m := range []tools.Module{tools.Etcd(), tools.Kube()} {
		got, err := tools.Ensure(ctx, repoRoot, cache, m)
		if err != nil {
			return binaries{}, err
		}
		maps.Copy(paths, got)
	}
	return binaries{etcd: paths["etcd"], apiserver: paths["kube-apiserver"], controllerManager: paths["kube-controller-manager"]}, nil
}
