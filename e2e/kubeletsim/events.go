package kubeletsim

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
)

// reasonFailedMount is the kubelet's Event reason for a volume it cannot set up (events.FailedMountVolume).
const reasonFailedMount = "FailedMount"

// newRecorder records Events as the kubelet on this node does: source component "kubelet", host the node.
// The broadcaster's correlator folds repeats of one failure into a count, as on a real node.
func newRecorder(ctx context.Context, n *Node) (record.EventRecorder, func()) {
	b := record.NewBroadcaster(record.WithContext(ctx))
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: n.client.CoreV1().Events("")})
	rec := b.NewRecorder(scheme.Scheme, v1.EventSource{Component: "kubelet", Host: n.cfg.NodeName})
	return rec, b.Shutdown
}

// reportFailedMount tells the Pod's owner why its volumes are not set up, with the kubelet's wording.
func (n *Node) reportFailedMount(pod *v1.Pod, err error) {
	if n.recorder == nil {
		return
	}
	n.recorder.Event(pod, v1.EventTypeWarning, reasonFailedMount, fmt.Sprintf("Unable to attach or mount volumes: %v", err))
}
