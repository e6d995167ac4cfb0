package cluster

import (
	"fmt"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// credentials authenticate a kubeconfig user: a client certificate or a bearer token.
type credentials struct {
	certPEM, keyPEM []byte
	token           string
}

// writeKubeconfig writes a self-contained kubeconfig (certificates embedded) for one user of server.
func writeKubeconfig(path, server string, caPEM []byte, user string, creds credentials) error {
	const name = "stowage-e2e"
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[name] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: caPEM}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{
		ClientCertificateData: creds.certPEM,
		ClientKeyData:         creds.keyPEM,
		Token:                 creds.token,
	}
	cfg.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: user}
	cfg.CurrentContext = name
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("write kubeconfig %s: %w", path, err)
	}
	return nil
}
