package node

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/stowage-csi/stowage/e2e/cluster"
	"github.com/stowage-csi/stowage/e2e/rig"
	"github.com/stowage-csi/stowage/e2e/tools"
)

// Proxy is kube-proxy in iptables mode, serving Services to every node's Pods. One is enough, and two would
// fight: the nodes share the host's network namespace and so its netfilter tables. Stop removes its rules.
type Proxy struct {
	bin  string
	dir  string
	proc *rig.Process
}

// StartProxy starts kube-proxy as nodeName's (the node need not be up yet). It leaves the host's sysctls
// and conntrack limits as they are: NodePorts on localhost (route_localnet) are off, and the conntrack
// settings are 0, which means "leave unchanged".
func StartProxy(ctx context.Context, c *cluster.Cluster, nw *Network, nodeName string) (_ *Proxy, err error) {
	bin, err := tools.Binary(ctx, tools.Kubelet(), "kube-proxy")
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "stowage-kube-proxy-")
	if err != nil {
		return nil, err
	}
	p := &Proxy{bin: bin, dir: dir}
	defer func() {
		if err != nil {
			err = errors.Join(err, p.Stop(context.WithoutCancel(ctx)))
		}
	}()
	kubeconfig := filepath.Join(dir, "kube-proxy.kubeconfig")
	// Kubernetes' bootstrap policy binds system:node-proxier to this user.
	if err := c.WriteUserKubeconfig(kubeconfig, "system:kube-proxy"); err != nil {
		return nil, err
	}
	ports, err := freePorts(2)
	if err != nil {
		return nil, err
	}
	p.proc, err = rig.Start(rig.Spec{Name: "kube-proxy", Path: bin, LogDir: dir, Args: []string{
		"--kubeconfig=" + kubeconfig,
		"--hostname-override=" + nodeName,
		"--proxy-mode=iptables",
		"--cluster-cidr=" + nw.Subnet.String(),
		"--iptables-localhost-nodeports=false",
		"--conntrack-max-per-core=0",
		"--conntrack-tcp-timeout-established=0",
		"--conntrack-tcp-timeout-close-wait=0",
		"--healthz-bind-address=127.0.0.1:" + strconv.Itoa(ports[0]),
		"--metrics-bind-address=127.0.0.1:" + strconv.Itoa(ports[1]),
		"--v=2",
	}})
	if err != nil {
		return nil, err
	}
	return p, nil
}

// LogPath is kube-proxy's log; it goes with Stop.
func (p *Proxy) LogPath() string {
	if p.proc == nil {
		return ""
	}
	return p.proc.LogPath
}

// Stop ends kube-proxy and removes every rule it made (kube-proxy --cleanup). Safe to call more than once.
func (p *Proxy) Stop(ctx context.Context) error {
	if p.proc != nil {
		p.proc.Stop(stopGrace)
		p.proc = nil
	}
	var errs []error
	if p.bin != "" {
		out, err := exec.CommandContext(ctx, p.bin, "--cleanup", "--v=0").CombinedOutput()
		if err != nil {
			errs = append(errs, fmt.Errorf("kube-proxy --cleanup: %w: %s", err, strings.TrimSpace(string(out))))
		} else {
			p.bin = ""
		}
	}
	if p.dir != "" {
		if err := os.RemoveAll(p.dir); err != nil {
			errs = append(errs, err)
		} else {
			p.dir = ""
		}
	}
	return errors.Join(errs...)
}
