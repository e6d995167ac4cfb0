package node

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/stowage-csi/stowage/e2e/rig"
)

// Network is the Pods' network: a Linux bridge on the host with the gateway address, shared by every node of
// one cluster. Each node's CNI config takes its Pods' addresses from a range of its own within the subnet.
type Network struct {
	Bridge  string
	Gateway net.IP     // the bridge's address: the Pods' default route and the API server's node address
	Subnet  *net.IPNet // a /16; node i's Pods get 10.x.(i+1).0/24
}

// NewNetwork creates a bridge with a /16 no interface on this machine uses yet. Packages running in
// parallel each get their own: the choice and the creation happen under a machine-wide lock.
func NewNetwork(ctx context.Context) (_ *Network, err error) {
	unlock, err := rig.LockFile(ctx, filepath.Join(os.TempDir(), "stowage-node-network.lock"))
	if err != nil {
		return nil, err
	}
	defer unlock()
	if err := removeOrphanBridges(ctx); err != nil {
		return nil, err
	}
	used, err := usedSubnets()
	if err != nil {
		return nil, err
	}
	suffix := make([]byte, 2)
	if _, err := rand.Read(suffix); err != nil {
		return nil, err
	}
	// The name carries the creating process's ID, so a later run can tell a bridge whose test was killed
	// (SIGKILL runs no cleanup) from one in use. At most 15 bytes, as Linux wants.
	name := fmt.Sprintf("%s%x-%s", bridgePrefix, os.Getpid(), hex.EncodeToString(suffix))
	for second := 200; second < 250; second++ {
		subnet := &net.IPNet{IP: net.IPv4(10, byte(second), 0, 0).To4(), Mask: net.CIDRMask(16, 32)}
		if used[subnet.String()] {
			continue
		}
		n := &Network{Bridge: name, Gateway: net.IPv4(10, byte(second), 0, 1).To4(), Subnet: subnet}
		if err := n.create(ctx); err != nil {
			return nil, err
		}
		return n, nil
	}
	return nil, fmt.Errorf("no free 10.200-249.0.0/16 for a Pod network")
}

// bridgePrefix starts the name of every bridge NewNetwork creates: stw<pid in hex>-<random>.
const bridgePrefix = "stw"

// removeOrphanBridges deletes the rig's bridges whose creating process is gone.
func removeOrphanBridges(ctx context.Context) error {
	ifaces, err := net.Interfaces()
	if err != nil {
		return fmt.Errorf("list interfaces: %w", err)
	}
	for _, ifc := range ifaces {
		pidHex, _, ok := strings.Cut(strings.TrimPrefix(ifc.Name, bridgePrefix), "-")
		if !strings.HasPrefix(ifc.Name, bridgePrefix) || !ok {
			continue
		}
		pid, err := strconv.ParseInt(pidHex, 16, 32)
		if err != nil {
			continue
		}
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err == nil {
			continue
		}
		if err := ip(ctx, "link", "del", ifc.Name); err != nil {
			return fmt.Errorf("remove the bridge of a run that was killed: %w", err)
		}
	}
	return nil
}

// usedSubnets returns the /16 of every IPv4 address on this machine's interfaces.
func usedSubnets() (map[string]bool, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, fmt.Errorf("list addresses: %w", err)
	}
	used := map[string]bool{}
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil {
			used[(&net.IPNet{IP: ipn.IP.Mask(net.CIDRMask(16, 32)), Mask: net.CIDRMask(16, 32)}).String()] = true
		}
	}
	return used, nil
}

// create adds the bridge with the gateway address. The CNI bridge plugin then runs with isGateway false:
// with it, the plugin would turn on the host's IP forwarding, which nothing here needs (Pod to Pod is one
// bridge, Pod to the API server and Services ends on the host).
func (n *Network) create(ctx context.Context) error {
	ones, _ := n.Subnet.Mask.Size()
	steps := [][]string{
		{"link", "add", n.Bridge, "type", "bridge"},
		{"addr", "add", fmt.Sprintf("%s/%d", n.Gateway, ones), "dev", n.Bridge},
		{"link", "set", n.Bridge, "up"},
	}
	for _, args := range steps {
		if err := ip(ctx, args...); err != nil {
			_ = n.Delete(ctx)
			return err
		}
	}
	return nil
}

// Delete removes the bridge (and with it its address and route). Deleting one that is gone is not an error.
func (n *Network) Delete(ctx context.Context) error {
	if _, err := net.InterfaceByName(n.Bridge); err != nil {
		return nil
	}
	return ip(ctx, "link", "del", n.Bridge)
}

// NodeRange is the address range of node i's Pods (i from 0).
func (n *Network) NodeRange(i int) (start, end net.IP) {
	base := n.Subnet.IP.To4()
	return net.IPv4(base[0], base[1], byte(i+1), 2).To4(), net.IPv4(base[0], base[1], byte(i+1), 254).To4()
}

func ip(ctx context.Context, args ...string) error {
	out, err := exec.CommandContext(ctx, "ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
