package node

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"

	"sigs.k8s.io/yaml"
)

// PauseImage is the Pod sandbox image, under the name the kubelet of the pinned release expects, so the
// kubelet and containerd agree on it and it is never pulled.
const PauseImage = "registry.k8s.io/pause:3.10.2"

// layout is where one node keeps its files: everything under its state directory, which Stop removes.
type layout struct {
	state      string // per-node directory on the host
	logs       string
	kubeletDir string // bind-mounted at /var/lib/kubelet inside the node
	socket     string // containerd's CRI and API socket, reachable from the host (ctr imports through it)
	cniConf    string
	cniData    string
	sysctls    string
}

func newLayout(state, logs string) layout {
	return layout{
		state: state, logs: logs,
		kubeletDir: filepath.Join(state, "kubelet"),
		socket:     filepath.Join(state, "containerd.sock"),
		cniConf:    filepath.Join(state, "cni"),
		cniData:    filepath.Join(state, "cni-ipam"),
		sysctls:    filepath.Join(state, "sysctl"),
	}
}

// containerdConfig is containerd 2's config (version 3) for one node.
func containerdConfig(l layout, runc, cniBin string) string {
	return fmt.Sprintf(`version = 3
root = %[1]q
# /run is private to the node's mount namespace.
state = "/run/containerd"

[grpc]
  address = %[2]q

[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = %[3]q

[plugins.'io.containerd.cri.v1.runtime']
  # This VM withholds CAP_SYS_RESOURCE, so the sandbox's default oom_score_adj (-998) cannot be written and
  # runc fails every Pod; restricted, the score is never set below containerd's own.
  restrict_oom_score_adj = true
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = "runc"
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        BinaryName = %[4]q
        # No systemd on these machines: cgroupfs, as the kubelet's cgroupDriver.
        SystemdCgroup = false
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = [%[5]q]
    conf_dir = %[6]q

[plugins.'io.containerd.grpc.v1.cri']
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
`, filepath.Join(l.state, "containerd"), l.socket, PauseImage, runc, cniBin, l.cniConf)
}

// cniConfig is the node's CNI network: a veth per Pod on the rig's bridge, addresses from the node's range.
func cniConfig(n *Network, index int, dataDir string) ([]byte, error) {
	start, end := n.NodeRange(index)
	conf := map[string]any{
		"cniVersion": "1.0.0",
		"name":       "stowage",
		"plugins": []any{
			map[string]any{
				"type":      "bridge",
				"bridge":    n.Bridge,
				"isGateway": false, // see Network.create
				"ipMasq":    false,
				"ipam": map[string]any{
					"type":    "host-local",
					"dataDir": dataDir,
					"ranges": [][]map[string]string{{{
						"subnet": n.Subnet.String(), "rangeStart": start.String(), "rangeEnd": end.String(),
						"gateway": n.Gateway.String(),
					}}},
					"routes": []map[string]string{{"dst": "0.0.0.0/0", "gw": n.Gateway.String()}},
				},
			},
			map[string]any{"type": "loopback"},
		},
	}
	return json.MarshalIndent(conf, "", "  ")
}

// kubeletPorts are the ports one node's kubelet listens on; nodes share the host's network.
type kubeletPorts struct{ port, healthz int }

// kubeletConfig is the node's KubeletConfiguration.
func kubeletConfig(l layout, nodeIP net.IP, ports kubeletPorts, cgroupRoot, caFile string) ([]byte, error) {
	cfg := map[string]any{
		"apiVersion":         "kubelet.config.k8s.io/v1beta1",
		"kind":               "KubeletConfiguration",
		"address":            nodeIP.String(),
		"port":               ports.port,
		"readOnlyPort":       0,
		"healthzBindAddress": "127.0.0.1",
		"healthzPort":        ports.healthz,
		"tlsCertFile":        filepath.Join(l.state, "kubelet.crt"),
		"tlsPrivateKeyFile":  filepath.Join(l.state, "kubelet.key"),
		"authentication": map[string]any{
			"anonymous": map[string]any{"enabled": false},
			"webhook":   map[string]any{"enabled": false},
			"x509":      map[string]any{"clientCAFile": caFile},
		},
		// Only the API server, with the admin certificate, talks to the kubelet.
		"authorization":            map[string]any{"mode": "AlwaysAllow"},
		"containerRuntimeEndpoint": "unix://" + l.socket,
		// Kubelet 1.36 refuses cgroup v1 unless told otherwise; these machines have nothing else.
		"failCgroupV1": false,
		"cgroupDriver": "cgroupfs",
		"cgroupRoot":   cgroupRoot,
		"failSwapOn":   false,
		// The rig's images are imported, never pulled: none may be collected.
		"imageGCHighThresholdPercent": 100,
		"imageGCLowThresholdPercent":  99,
		// A busy shared disk must not evict the test's Pods.
		"evictionHard": map[string]string{
			"memory.available": "100Mi", "nodefs.available": "1%", "nodefs.inodesFree": "1%", "imagefs.available": "1%",
		},
		// Outside the kubelet's root by default (/usr/libexec/kubernetes/...): kept in the node's state.
		"volumePluginDir":        filepath.Join(l.state, "volume-plugins"),
		"makeIPTablesUtilChains": false,
		"serializeImagePulls":    false,
		// Graceful node shutdown needs systemd-logind.
		"shutdownGracePeriod":             "0s",
		"shutdownGracePeriodCriticalPods": "0s",
		"nodeStatusUpdateFrequency":       "4s",
		// A Pod's sync is what grows a volume's filesystem once its claim grew (NodeExpandVolume on line):
		// at the default minute, each on-line growth waits up to a minute plus jitter for it.
		"syncFrequency": "10s",
		"resolvConf":    "/etc/resolv.conf",
		"clusterDomain": "cluster.local",
	}
	return yaml.Marshal(cfg)
}

// sysctlCopies are the host sysctls the kubelet sets when protectKernelDefaults is off, with the values it
// wants. Inside the node each is a bind mount of a file holding that value, so the kubelet finds them set
// and the host's stay as they are.
func sysctlCopies() map[string]int {
	return map[string]int{"vm/overcommit_memory": 1, "kernel/panic": 10, "kernel/panic_on_oops": 1}
}

func writeSysctlCopies(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for name, v := range sysctlCopies() {
		if err := os.WriteFile(filepath.Join(dir, sysctlFile(name)), []byte(strconv.Itoa(v)+"\n"), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// sysctlFile names the copy of a /proc/sys path: kernel/panic -> kernel_panic.
func sysctlFile(name string) string {
	out := []byte(name)
	for i, c := range out {
		if c == '/' {
			out[i] = '_'
		}
	}
	return string(out)
}
