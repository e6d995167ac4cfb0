package cluster

import (
	"crypto/x509"
	"fmt"
	"net"
	"os"
)

// kubernetesServiceIP is the cluster IP of the kubernetes Service: the first address of the API server's
// --service-cluster-ip-range.
var kubernetesServiceIP = net.IPv4(10, 96, 0, 1)

// nodeFacingArgs are the API server flags for a cluster with real nodes (Options.NodeAddress).
func nodeFacingArgs(addr net.IP, certs *pki) []string {
	return []string{
		"--bind-address=0.0.0.0",
		"--advertise-address=" + addr.String(),
		// The kubernetes Service's endpoint is the node address, kept by the lease reconciler as in a cluster.
		"--endpoint-reconciler-type=lease",
		// Logs, exec and port-forward go from the API server to the kubelet, which trusts the rig's CA.
		"--kubelet-client-certificate=" + certs.adminCert,
		"--kubelet-client-key=" + certs.adminKey,
		"--kubelet-certificate-authority=" + certs.caCert,
		"--kubelet-preferred-address-types=InternalIP",
	}
}

// CACert returns the PEM certificate of the cluster's CA, which every component and kubelet trusts.
func (c *Cluster) CACert() []byte { return c.certs.ca.certPEM }

// WriteUserKubeconfig writes a kubeconfig at path for user in groups, with a client certificate signed by
// the cluster's CA: a kubelet (system:node:<name> in system:nodes) or kube-proxy (system:kube-proxy).
func (c *Cluster) WriteUserKubeconfig(path, user string, groups ...string) error {
	kp, err := c.certs.ca.issue(certSpec{commonName: user, orgs: groups, usages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	if err != nil {
		return fmt.Errorf("issue certificate for %s: %w", user, err)
	}
	return writeKubeconfig(path, c.config.Host, c.certs.ca.certPEM, user, credentials{certPEM: kp.certPEM, keyPEM: kp.keyPEM})
}

// WriteServingCert writes a serving certificate and key for a server reached at ips (a kubelet), signed by
// the cluster's CA, so the API server's --kubelet-certificate-authority verifies it.
func (c *Cluster) WriteServingCert(certPath, keyPath, name string, ips ...net.IP) error {
	kp, err := c.certs.ca.issue(certSpec{commonName: name, dnsNames: []string{name, "localhost"}, ips: ips,
		usages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	if err != nil {
		return fmt.Errorf("issue serving certificate for %s: %w", name, err)
	}
	if err := os.WriteFile(certPath, kp.certPEM, 0o644); err != nil {
		return fmt.Errorf("write %s: %w", certPath, err)
	}
	if err := os.WriteFile(keyPath, kp.keyPEM, 0o600); err != nil {
		return fmt.Errorf("write %s: %w", keyPath, err)
	}
	return nil
}
