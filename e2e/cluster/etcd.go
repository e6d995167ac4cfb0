package cluster

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// startEtcd starts a single-member etcd on two free loopback ports and waits until it is healthy.
func startEtcd(ctx context.Context, bin, dir, logDir string) (p *process, clientURL string, err error) {
	dataDir := filepath.Join(dir, "etcd")
	err = retryOnPortClash(2, func(ports []int) error {
		// A failed attempt may have initialised the data dir with the old peer URL.
		if err := os.RemoveAll(dataDir); err != nil {
			return fmt.Errorf("clear etcd data dir: %w", err)
		}
		clientURL = fmt.Sprintf("http://127.0.0.1:%d", ports[0])
		peerURL := fmt.Sprintf("http://127.0.0.1:%d", ports[1])
		args := []string{
			"--name=stowage-e2e",
			"--data-dir=" + dataDir,
			"--listen-client-urls=" + clientURL,
			"--advertise-client-urls=" + clientURL,
			"--listen-peer-urls=" + peerURL,
			"--initial-advertise-peer-urls=" + peerURL,
			"--initial-cluster=stowage-e2e=" + peerURL,
			"--initial-cluster-state=new",
			// The data is thrown away with the cluster; fsync only slows tests down.
			"--unsafe-no-fsync=true",
		}
		p, err = startProcess("etcd", bin, args, logDir)
		if err != nil {
			return err
		}
		if err := p.waitReady(ctx, time.Minute, func(ctx context.Context) error { return etcdHealthy(ctx, clientURL) }); err != nil {
			p.Stop(stopGrace)
			return err
		}
		return nil
	})
	if err != nil {
		return nil, "", err
	}
	return p, clientURL, nil
}

func etcdHealthy(ctx context.Context, clientURL string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, clientURL+"/health", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"health":"true"`) {
		return fmt.Errorf("etcd /health: %s %s", resp.Status, body)
	}
	return nil
}
