package cluster

import (
	"context"
	"path/filepath"
	"strconv"
	"time"
)

// schedulerUser is the identity of kube-scheduler's client certificate; Kubernetes' bootstrap RBAC policy binds
// the system:kube-scheduler and system:volume-scheduler ClusterRoles to it.
const schedulerUser = "system:kube-scheduler"

// startScheduler starts kube-scheduler and waits for /healthz. Tests that create Pods with spec.nodeName set
// never meet it; Pods left to it are placed as a real cluster places them, and its volume binder sets
// volume.kubernetes.io/selected-node on WaitForFirstConsumer claims (those of generic ephemeral volumes too).
func startScheduler(ctx context.Context, bin, dir, logDir, kubeconfig string, certs *pki) (*process, error) {
	var p *process
	err := retryOnPortClash(1, func(ports []int) error {
		port := strconv.Itoa(ports[0])
		args := []string{
			"--kubeconfig=" + kubeconfig,
			"--authentication-kubeconfig=" + kubeconfig,
			"--authorization-kubeconfig=" + kubeconfig,
			"--bind-address=127.0.0.1",
			"--secure-port=" + port,
			"--tls-cert-file=" + certs.servingCert,
			"--tls-private-key-file=" + certs.servingKey,
			"--cert-dir=" + filepath.Join(dir, "scheduler-certs"),
			"--leader-elect=false",
		}
		var err error
		p, err = startProcess("kube-scheduler", bin, args, logDir)
		if err != nil {
			return err
		}
		if err := p.waitReady(ctx, 2*time.Minute, secureHealthz(certs, port)); err != nil {
			p.Stop(stopGrace)
			return err
		}
		return nil
	})
	return p, err
}
