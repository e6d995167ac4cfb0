package s3install

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/stowage-csi/stowage/e2e/rig"
	"github.com/stowage-csi/stowage/shared/s3api"
)

// waitRegistered waits for the real kubelet to list the driver in the node's CSINode and for the startup
// taint, which the node plugin removes once registered, to be gone.
func waitRegistered(ctx context.Context, client kubernetes.Interface, nodeName string, timeout time.Duration) error {
	err := rig.WaitFor(ctx, timeout, "the kubelet to register "+s3api.DriverName+" on "+nodeName, func(ctx context.Context) (bool, error) {
		csiNode, err := client.StorageV1().CSINodes().Get(ctx, nodeName, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return slices.ContainsFunc(csiNode.Spec.Drivers, func(d storagev1.CSINodeDriver) bool {
			return d.Name == s3api.DriverName && d.NodeID == nodeName
		}), nil
	})
	if err != nil {
		return err
	}
	return rig.WaitFor(ctx, timeout, "the startup taint to leave "+nodeName, func(ctx context.Context) (bool, error) {
		n, err := client.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return !slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == s3api.TaintAgentNotReady }), nil
	})
}

// checkLiveness checks that the controller's Deployment and the node plugin's DaemonSet are available, asks
// each node plugin Pod's liveness endpoint, the one the kubelet probes, for an answer of 200 (the
// livenessprobe sidecar calls the plugin's Probe), and checks that the kubelet found every container of the
// Pod Ready without a restart.
func checkLiveness(ctx context.Context, client kubernetes.Interface, nodes int) error {
	dep, err := client.AppsV1().Deployments(Namespace).Get(ctx, "s3-csi-controller", metav1.GetOptions{})
	if err != nil {
		return err
	}
	var errs []error
	if dep.Status.AvailableReplicas != 1 {
		errs = append(errs, fmt.Errorf("the Deployment s3-csi-controller has %d available replicas, want 1", dep.Status.AvailableReplicas))
	}
	ds, err := client.AppsV1().DaemonSets(Namespace).Get(ctx, "s3-csi-node", metav1.GetOptions{})
	if err != nil {
		return err
	}
	if int(ds.Status.NumberReady) != nodes || int(ds.Status.NumberAvailable) != nodes {
		errs = append(errs, fmt.Errorf("the DaemonSet s3-csi-node has %d ready and %d available Pods, want %d", ds.Status.NumberReady, ds.Status.NumberAvailable, nodes))
	}
	pods, err := client.CoreV1().Pods(Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app=s3-csi-node"})
	if err != nil {
		return err
	}
	if len(pods.Items) != nodes {
		return errors.Join(append(errs, fmt.Errorf("%d node plugin Pods, want one on each of %d nodes", len(pods.Items), nodes))...)
	}
	for _, p := range pods.Items {
		url := fmt.Sprintf("http://%s:9808/healthz", p.Status.PodIP)
		if err := rig.WaitFor(ctx, time.Minute, "GET "+url+" of "+p.Name+" to answer 200", func(ctx context.Context) (bool, error) {
			return healthy(ctx, url)
		}); err != nil {
			errs = append(errs, err)
		}
		for _, cs := range p.Status.ContainerStatuses {
			if !cs.Ready || cs.RestartCount != 0 {
				errs = append(errs, fmt.Errorf("container %s of %s: ready %v, %d restarts", cs.Name, p.Name, cs.Ready, cs.RestartCount))
			}
		}
	}
	return errors.Join(errs...)
}

func healthy(ctx context.Context, url string) (bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode == http.StatusOK, nil
}
