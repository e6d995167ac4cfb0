package cluster

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// serviceAccountIssuer is the iss claim of service-account tokens and the default token audience.
const serviceAccountIssuer = "https://kubernetes.default.svc"

// startAPIServer starts kube-apiserver on a free loopback port and waits until /readyz passes. It returns
// the process and the admin REST config for it.
func startAPIServer(ctx context.Context, bin, dir, logDir, etcdURL string, certs *pki, extra []string) (*process, *rest.Config, error) {
	var (
		p   *process
		cfg *rest.Config
	)
	err := retryOnPortClash(1, func(ports []int) error {
		cfg = &rest.Config{
			Host: "https://127.0.0.1:" + strconv.Itoa(ports[0]),
			TLSClientConfig: rest.TLSClientConfig{
				CAData:   certs.ca.certPEM,
				CertData: certs.admin.certPEM,
				KeyData:  certs.admin.keyPEM,
			},
		}
		args := append([]string{
			"--etcd-servers=" + etcdURL,
			"--bind-address=127.0.0.1",
			"--advertise-address=127.0.0.1",
			"--secure-port=" + strconv.Itoa(ports[0]),
			"--tls-cert-file=" + certs.servingCert,
			"--tls-private-key-file=" + certs.servingKey,
			"--client-ca-file=" + certs.caCert,
			"--authorization-mode=Node,RBAC",
			"--service-account-issuer=" + serviceAccountIssuer,
			"--api-audiences=" + serviceAccountIssuer,
			"--service-account-key-file=" + certs.saPublicKey,
			"--service-account-signing-key-file=" + certs.saPrivateKey,
			"--service-cluster-ip-range=10.96.0.0/16",
			"--allow-privileged=true",
			// The endpoints of the kubernetes Service would be 127.0.0.1, which Endpoints reject, and
			// nothing runs in-cluster that needs them.
			"--endpoint-reconciler-type=none",
			"--cert-dir=" + filepath.Join(dir, "apiserver-certs"),
		}, extra...)
		var err error
		p, err = startProcess("kube-apiserver", bin, args, logDir)
		if err != nil {
			return err
		}
		client, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			p.Stop(stopGrace)
			return fmt.Errorf("admin client: %w", err)
		}
		ready := func(ctx context.Context) error {
			body, err := client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
			if err != nil {
				return fmt.Errorf("/readyz: %w: %s", err, body)
			}
			return nil
		}
		if err := p.waitReady(ctx, 3*time.Minute, ready); err != nil {
			p.Stop(stopGrace)
			return err
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	return p, cfg, nil
}
