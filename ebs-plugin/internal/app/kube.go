package app

import (
	"fmt"

	"k8s.io/client-go/kubernetes"

	"github.com/stowage-csi/stowage/shared/kubeclient"
)

// kubeClient builds the Kubernetes client from --kubeconfig, or the in-cluster configuration when it is empty.
func kubeClient(c Config) (kubernetes.Interface, error) {
	cfg, err := kubeclient.RESTConfig(kubeclient.Options{Kubeconfig: c.Kubeconfig, UserAgent: "ebs-plugin/" + c.Version})
	if err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(kubeclient.ForCore(cfg))
	if err != nil {
		return nil, fmt.Errorf("creating the Kubernetes client: %w", err)
	}
	return cs, nil
}
