package ebsstack

import (
	"context"
	"fmt"

	"github.com/stowage-csi/stowage/e2e/rig"
)

// Process is one Stowage binary running as a child (see rig.Process).
type Process = rig.Process

// startProcess runs bin with args and exactly env (nothing inherited, so no credentials or AWS_CA_BUNDLE of
// the machine leak in), logging to logDir/<name>.log.
func startProcess(name, bin string, args, env []string, logDir string) (*Process, error) {
	if env == nil {
		env = []string{} // nil would inherit this process's environment
	}
	return rig.Start(rig.Spec{Name: name, Path: bin, Args: args, Env: env, LogDir: logDir})
}

// buildBinaries builds the Stowage binaries the stack runs into dir, from the modules at the repository
// root.
func buildBinaries(ctx context.Context, root, dir string, with []string) (map[string]string, error) {
	out := map[string]string{}
	type binary struct{ module, name string }
	bins := []binary{{"ebs-plugin", "ebs-plugin"}, {"provisioner", "csi-provisioner"}, {"attacher", "csi-attacher"}}
	for _, w := range with {
		bins = append(bins, binary{Extras[w], w})
	}
	for _, b := range bins {
		bin, err := rig.BuildCommand(ctx, root, b.module, b.name, dir)
		if err != nil {
			return nil, fmt.Errorf("build the stack's binaries: %w", err)
		}
		out[b.name] = bin
	}
	return out, nil
}
