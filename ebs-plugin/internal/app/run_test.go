package app

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stowage-csi/stowage/ebs-plugin/internal/driver"
	"github.com/stowage-csi/stowage/shared/testutil"
)

// nodeConfig is a node-mode configuration that needs no AWS: metadata from a Kubernetes source without a
// cluster, which fails only when asked.
func nodeConfig(t *testing.T) Config {
	return Config{Mode: driver.ModeNode, Endpoint: "unix://" + filepath.Join(t.TempDir(), "csi.sock"), HTTPEndpoint: "127.0.0.1:0",
		MetadataSources: []string{"kubernetes"}, Kubeconfig: filepath.Join(t.TempDir(), "no-kubeconfig"),
		VolumeAttachLimit: -1, ReservedVolumeAttachments: -1, ModifyVolumeWindow: time.Second, DeviceLinkDir: t.TempDir()}
}

func TestMetricsServeHTTPSWithTheCertificateFlagsAndStopWithRun(t *testing.T) {
	certFile, keyFile, pool := testutil.SelfSignedCert(t)
	c := nodeConfig(t)
	c.MetricsCertFile, c.MetricsKeyFile = certFile, keyFile
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p, err := build(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	ran := make(chan error, 1)
	go func() { ran <- p.run(ctx) }()

	url := p.metrics.URL("/metrics")
	if !strings.HasPrefix(url, "https://") {
		t.Fatalf("metrics URL %s, want https", url)
	}
	transport := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}
	defer transport.CloseIdleConnections()
	// The listener is bound by build, so the request waits in its backlog if Serve has not started yet.
	resp, err := (&http.Client{Transport: transport}).Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "go_goroutines") {
		t.Fatalf("GET %s = %d, %v:\n%s", url, resp.StatusCode, err, body)
	}
	transport.CloseIdleConnections()

	cancel()
	if err := <-ran; err != nil {
		t.Fatalf("run after cancel = %v, want nil", err)
	}
}

func TestRunStopsMetricsWhenCSIFails(t *testing.T) {
	c := nodeConfig(t)
	c.Endpoint = "tcp://256.0.0.1:1" // cannot be bound
	p, err := build(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	// No cancel: run returns only because the CSI server failed and took the metrics server down with it.
	if err := p.run(context.Background()); err == nil || !strings.Contains(err.Error(), "256.0.0.1") {
		t.Fatalf("run = %v, want the CSI listen error", err)
	}
}

func TestBuildFailsOnUnreadableCertificate(t *testing.T) {
	c := nodeConfig(t)
	c.MetricsCertFile, c.MetricsKeyFile = filepath.Join(t.TempDir(), "missing.crt"), filepath.Join(t.TempDir(), "missing.key")
	if _, err := build(context.Background(), c); err == nil || !strings.Contains(err.Error(), "missing.crt") {
		t.Fatalf("build = %v, want an error naming the certificate", err)
	}
}

func TestPreStopHookModeRunsTheHookNotTheDriver(t *testing.T) {
	c := nodeConfig(t)
	c.Mode, c.NodeName = ModePreStopHook, "node-1"
	// The driver would start serving; the hook needs the API server first and fails on the missing kubeconfig.
	if err := Run(context.Background(), c); err == nil || !strings.Contains(err.Error(), "no-kubeconfig") {
		t.Fatalf("Run = %v, want the hook's error about the missing kubeconfig", err)
	}
}

func TestStartupTaintRemovalNeverHoldsUpServingOrStopping(t *testing.T) {
	c := nodeConfig(t)
	c.Endpoint = "tcp://256.0.0.1:1" // cannot be bound
	p, err := build(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	// A removal that would wait forever, as one does while the kubelet has not registered the driver.
	removalEnded := false
	p.untaint = func(ctx context.Context) {
		<-ctx.Done()
		removalEnded = true
	}
	if err := p.run(context.Background()); err == nil || !strings.Contains(err.Error(), "256.0.0.1") {
		t.Fatalf("run = %v, want the CSI listen error", err)
	}
	// Read after run returned: run waits for the removal, so this is ordered without a lock.
	if !removalEnded {
		t.Fatal("run returned before the taint removal ended")
	}
}

func TestStartupTaintRemoverNeedsNodeNameAndClient(t *testing.T) {
	c := nodeConfig(t)
	if startupTaintRemover(context.Background(), c) != nil {
		t.Error("remover without CSI_NODE_NAME")
	}
	c.NodeName = "node-1" // but the kubeconfig does not exist
	if startupTaintRemover(context.Background(), c) != nil {
		t.Error("remover without a Kubernetes client")
	}
}
