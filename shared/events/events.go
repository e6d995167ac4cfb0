// Package events records Kubernetes Events (core/v1, what `kubectl describe` shows) on behalf of a component,
// like the upstream sidecars do.
package events

import (
	"context"
	"errors"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
)

// Options configure a recorder.
type Options struct {
	// Component is the Event source ("csi-attacher", "csi-provisioner"...).
	Component string
	// Scheme must know every type events are recorded on; nil means client-go's scheme (built-in types only).
	// Add the snapshot or S3 types to a scheme of your own to record events on them.
	Scheme *runtime.Scheme
	// CoalesceWindow is how long the count updates of a repeated Event are held so that they go out as one
	// PATCH; 0 means DefaultCoalesceWindow, a negative value sends each one at once (client-go's behaviour).
	CoalesceWindow time.Duration
}

// DefaultCoalesceWindow bounds how late `kubectl describe` shows the count of a repeated Event.
const DefaultCoalesceWindow = 10 * time.Second

// Recorder sends Events to the API server until its context ends.
type Recorder struct {
	record.EventRecorderLogger
	broadcaster record.EventBroadcaster
	sink        *coalescingSink
}

// New starts a broadcaster that writes Events through client and stops when ctx ends (or on Shutdown).
// Similar events are aggregated and rate limited by client-go's correlator, and the count updates of repeated
// ones coalesced (coalesce.go), so a retry loop cannot flood the API server. Recording never blocks the caller:
// the broadcaster queues Events and drops them when its queue is full (a slow or stuck API server), so pass a
// client of their own (sidecar.Options.EventsOwnClient) to keep Events off the work path's rate limiter.
func New(ctx context.Context, client kubernetes.Interface, o Options) (*Recorder, error) {
	if o.Component == "" {
		return nil, errors.New("event recorder needs a component name")
	}
	s := o.Scheme
	if s == nil {
		s = scheme.Scheme
	}
	b := record.NewBroadcaster(record.WithContext(ctx))
	b.StartStructuredLogging(4)
	window := o.CoalesceWindow
	if window == 0 {
		window = DefaultCoalesceWindow
	}
	sink := newCoalescingSink(ctx, &typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")}, window)
	b.StartRecordingToSink(sink)
	rec := b.NewRecorder(s, corev1.EventSource{Component: o.Component}).WithLogger(klog.FromContext(ctx))
	return &Recorder{EventRecorderLogger: rec, broadcaster: b, sink: sink}, nil
}

// Shutdown stops the broadcaster, sends the count updates held back, and waits for the Event being written,
// if any; Events not yet sent are dropped.
func (r *Recorder) Shutdown() {
	r.broadcaster.Shutdown()
	r.sink.stop()
}
