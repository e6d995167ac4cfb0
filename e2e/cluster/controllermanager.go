package cluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"time"
)

// startControllerManager starts kube-controller-manager with every default controller (PV binder,
// attach-detach, expander, service-account token, namespace, garbage collector...) and waits for /healthz.
func startControllerManager(ctx context.Context, bin, dir, logDir, kubeconfig string, certs *pki, extra []string) (*process, error) {
	var p *process
	err := retryOnPortClash(1, func(ports []int) error {
		port := strconv.Itoa(ports[0])
		args := append([]string{
			"--kubeconfig=" + kubeconfig,
			// Delegated authentication and authorization for its own /metrics; /healthz is always allowed.
			"--authentication-kubeconfig=" + kubeconfig,
			"--authorization-kubeconfig=" + kubeconfig,
			"--bind-address=127.0.0.1",
			"--secure-port=" + port,
			"--tls-cert-file=" + certs.servingCert,
			"--tls-private-key-file=" + certs.servingKey,
			"--cert-dir=" + filepath.Join(dir, "controller-manager-certs"),
			"--controllers=*",
			// Each controller acts as its own kube-system ServiceAccount, as in a real cluster, so
			// RBAC denials show up here the way they would there.
			"--use-service-account-credentials=true",
			"--service-account-private-key-file=" + certs.saPrivateKey,
			"--root-ca-file=" + certs.caCert,
			"--cluster-signing-cert-file=" + certs.caCert,
			"--cluster-signing-key-file=" + certs.caKey,
			"--leader-elect=false",
		}, extra...)
		var err error
		p, err = startProcess("kube-controller-manager", bin, args, logDir)
		if err != nil {
			return err
		}
		healthz := secureHealthz(certs, port)
		if err := p.waitReady(ctx, 2*time.Minute, healthz); err != nil {
			p.Stop(stopGrace)
			return err
		}
		return nil
	})
	return p, err
}

// secureHealthz checks a component's /healthz on its secure loopback port, trusting the rig's CA.
func secureHealthz(certs *pki, port string) func(context.Context) error {
	pool := x509.NewCertPool()
	pool.AddCert(certs.ca.cert)
	return func(ctx context.Context) error {
		client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
		defer client.CloseIdleConnections()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://127.0.0.1:"+port+"/healthz", nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("/healthz: %s %s", resp.Status, body)
		}
		return nil
	}
}
