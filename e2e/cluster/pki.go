package cluster

import (
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"path/filepath"
)

// Identities the control plane's client certificates carry. Kubernetes' bootstrap RBAC policy grants
// system:masters everything and binds the system:kube-controller-manager ClusterRole to that user.
const (
	adminUser             = "stowage-admin"
	adminGroup            = "system:masters"
	controllerManagerUser = "system:kube-controller-manager"
)

// pki is the control plane's certificates and keys, as files under one folder.
type pki struct {
	ca                *keyPair
	admin             *keyPair
	controllerManager *keyPair
	scheduler         *keyPair

	caCert, caKey             string
	adminCert, adminKey       string
	servingCert, servingKey   string
	saPrivateKey, saPublicKey string
}

// servingSpec is the serving certificate of every control-plane component. They listen on loopback; with a
// node address the API server is also reached there and, from Pods, as the kubernetes Service.
func servingSpec(nodeAddress net.IP) certSpec {
	spec := certSpec{
		commonName: "stowage-control-plane",
		dnsNames:   []string{"localhost"},
		ips:        []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		usages:     []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if nodeAddress != nil {
		spec.ips = append(spec.ips, nodeAddress, kubernetesServiceIP)
		spec.dnsNames = append(spec.dnsNames, "kubernetes", "kubernetes.default", "kubernetes.default.svc",
			"kubernetes.default.svc.cluster.local")
	}
	return spec
}

// writePKI creates a fresh CA, the serving and client certificates and the service-account signing key.
func writePKI(dir string, nodeAddress net.IP) (*pki, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create pki dir: %w", err)
	}
	ca, err := newCA("stowage-e2e-ca")
	if err != nil {
		return nil, err
	}
	serving, err := ca.issue(servingSpec(nodeAddress))
	if err != nil {
		return nil, err
	}
	client := []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	admin, err := ca.issue(certSpec{commonName: adminUser, orgs: []string{adminGroup}, usages: client})
	if err != nil {
		return nil, err
	}
	kcm, err := ca.issue(certSpec{commonName: controllerManagerUser, usages: client})
	if err != nil {
		return nil, err
	}
	scheduler, err := ca.issue(certSpec{commonName: schedulerUser, usages: client})
	if err != nil {
		return nil, err
	}
	saPriv, saPub, err := newSigningKey()
	if err != nil {
		return nil, err
	}

	p := &pki{
		ca: ca, admin: admin, controllerManager: kcm, scheduler: scheduler,
		caCert: filepath.Join(dir, "ca.crt"), caKey: filepath.Join(dir, "ca.key"),
		servingCert: filepath.Join(dir, "serving.crt"), servingKey: filepath.Join(dir, "serving.key"),
		adminCert: filepath.Join(dir, "admin.crt"), adminKey: filepath.Join(dir, "admin.key"),
		saPrivateKey: filepath.Join(dir, "sa.key"), saPublicKey: filepath.Join(dir, "sa.pub"),
	}
	files := map[string][]byte{
		p.caCert: ca.certPEM, p.caKey: ca.keyPEM,
		p.servingCert: serving.certPEM, p.servingKey: serving.keyPEM,
		p.adminCert: admin.certPEM, p.adminKey: admin.keyPEM,
		p.saPrivateKey: saPriv, p.saPublicKey: saPub,
	}
	for path, data := range files {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return nil, fmt.Errorf("write %s: %w", path, err)
		}
	}
	return p, nil
}
