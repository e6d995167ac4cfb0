package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// serviceAccountTokenSeconds is the lifetime of tokens in ServiceAccount kubeconfigs: longer than any
// test or demo session.
const serviceAccountTokenSeconds = 24 * 60 * 60

// ServiceAccountKubeconfig creates the namespace and ServiceAccount if they are missing, requests a token
// for it (TokenRequest) and writes a kubeconfig that authenticates as
// system:serviceaccount:<namespace>:<name>. It returns the kubeconfig's path, inside the cluster's directory.
// The account has no permissions beyond Kubernetes' defaults until RBAC grants them (see Apply).
func (c *Cluster) ServiceAccountKubeconfig(ctx context.Context, namespace, name string) (string, error) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}
	if _, err := c.client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("create namespace %s: %w", namespace, err)
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	if _, err := c.client.CoreV1().ServiceAccounts(namespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("create serviceaccount %s/%s: %w", namespace, name, err)
	}
	expiry := int64(serviceAccountTokenSeconds)
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry}}
	tok, err := c.client.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, req, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("request token for serviceaccount %s/%s: %w", namespace, name, err)
	}

	dir := filepath.Join(c.dir, "serviceaccounts")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("create kubeconfig dir: %w", err)
	}
	path := filepath.Join(dir, namespace+"."+name+".kubeconfig")
	user := "system:serviceaccount:" + namespace + ":" + name
	if err := writeKubeconfig(path, c.config.Host, c.certs.ca.certPEM, user, credentials{token: tok.Status.Token}); err != nil {
		return "", err
	}
	return path, nil
}
