package registrar

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"k8s.io/klog/v2"
)

// Probe is --mode=kubelet-registration-probe, an exec liveness probe run in the registrar's container: it
// succeeds when a registration socket in --plugin-registration-path answers GetInfo with --kubelet-registration-path
// as the driver's endpoint, that is when this container's registrar is up and reachable where the kubelet
// looks. The driver's name is not known here (the probe is not given --csi-address), so each socket is asked.
//
// Upstream's probe looked for a file the registrar wrote on GetInfo, which failed under a read-only root file
// system (kubernetes-csi/node-driver-registrar#244); since v2.9 it succeeds unconditionally
// (kubernetes-csi/node-driver-registrar#309). This one writes nothing and still checks something.
func Probe(ctx context.Context, cfg Config) error {
	logger := klog.FromContext(ctx)
	sockets, err := filepath.Glob(filepath.Join(cfg.PluginRegistrationPath, "*-reg.sock"))
	if err != nil {
		return fmt.Errorf("listing registration sockets in %s: %w", cfg.PluginRegistrationPath, err)
	}
	var seen []string
	for _, socket := range sockets {
		if socketState(socket) != nil {
			continue
		}
		info, err := getInfo(ctx, socket, cfg.Timeout)
		if err != nil {
			// A stale socket, or another plugin's that is down: not ours to judge.
			logger.V(2).Info("Registration socket does not answer", "socket", socket, "err", err)
			continue
		}
		if info.GetEndpoint() == cfg.KubeletRegistrationPath {
			logger.Info("Kubelet plugin registration socket answers", "socket", socket, "driver", info.GetName())
			return nil
		}
		seen = append(seen, fmt.Sprintf("%s (%s at %s)", socket, info.GetName(), info.GetEndpoint()))
	}
	return fmt.Errorf("no registration socket in %s answers for %s; answering: [%s]",
		cfg.PluginRegistrationPath, cfg.KubeletRegistrationPath, strings.Join(seen, ", "))
}
