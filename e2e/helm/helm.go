// Package helm installs and uninstalls charts on the rig's clusters with Helm's own command line (built from
// its module by e2e/tools), as users install Stowage's charts.
package helm

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/stowage-csi/stowage/e2e/tools"
)

// Client runs helm against one cluster. Its state (repositories, cache, config) lives in a directory of its
// own, so nothing of the machine's Helm setup is read or written.
type Client struct {
	bin        string
	kubeconfig string
	home       string
}

// New builds helm if the cache lacks it. home holds Helm's state; the caller removes it.
func New(ctx context.Context, kubeconfig, home string) (*Client, error) {
	bin, err := tools.Binary(ctx, tools.Helm(), "helm")
	if err != nil {
		return nil, err
	}
	return &Client{bin: bin, kubeconfig: kubeconfig, home: home}, nil
}

// Install runs `helm install release chart --namespace ns --wait` with values (written as a values file) and
// returns helm's output. wait bounds how long Helm waits for the release's workloads to be ready.
func (c *Client) Install(ctx context.Context, release, chart, namespace string, values map[string]any, wait time.Duration) (string, error) {
	data, err := yaml.Marshal(values)
	if err != nil {
		return "", fmt.Errorf("values of %s: %w", release, err)
	}
	file := filepath.Join(c.home, release+"-values.yaml")
	if err := os.WriteFile(file, data, 0o644); err != nil {
		return "", err
	}
	return c.run(ctx, "install", release, chart, "--namespace", namespace, "--create-namespace",
		"--values", file, "--wait", "--timeout", wait.String())
}

// Uninstall runs `helm uninstall release --namespace ns --wait`.
func (c *Client) Uninstall(ctx context.Context, release, namespace string) (string, error) {
	return c.run(ctx, "uninstall", release, "--namespace", namespace, "--wait", "--timeout", "5m")
}

func (c *Client) run(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, c.bin, append(args, "--kubeconfig", c.kubeconfig)...)
	cmd.Env = []string{
		"HOME=" + c.home, "PATH=" + os.Getenv("PATH"),
		"HELM_CACHE_HOME=" + filepath.Join(c.home, "cache"),
		"HELM_CONFIG_HOME=" + filepath.Join(c.home, "config"),
		"HELM_DATA_HOME=" + filepath.Join(c.home, "data"),
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("helm %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}
