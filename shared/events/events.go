// Package events records Kubernetes Events (core/v1, what `kubectl describe` shows) on behalf of a component,
// like the upstream sidecars do.
package events

import (
	"context"
	"errors"
	"sync"

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
}

// Recorder sends Events to the API server until its context ends.
type Recorder struct {
	record.EventRecorderLogger
	broadcaster record.EventBroadcaster
	// writing is held (read-locked) by each Event write to the API server, so Shutdown can wait for the one
	// in flight: client-go's Shutdown does not, and a write still running after it would outlive its owner.
	writing *sync.RWMutex
}

// New starts a broadcaster that writes Events through client and stops when ctx ends (or on Shutdown).
// Similar events are aggregated and rate limited by client-go's correlator, so a retry loop cannot flood
// the API server.
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
	writing := &sync.RWMutex{}
	b.StartRecordingToSink(&trackedSink{sink: &typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")}, writing: writing})
	rec := b.NewRecorder(s, corev1.EventSource{Component: o.Component}).WithLogger(klog.FromContext(ctx))
	return &Recorder{EventRecorderLogger: rec, broadcaster: b, writing: writing}, nil
}

// Shutdown stops the broadcaster and waits for the Event being written, if any; Events not yet sent are
// dropped.
func (r *Recorder) Shutdown() {
	r.broadcaster.Shutdown()
	r.writing.Lock()
	defer r.writing.Unlock()
}

// trackedSink is an EventSink whose writes Shutdown can wait for.
type trackedSink struct {
	sink    record.EventSink
	writing *sync.RWMutex
}

func (s *trackedSink) Create(e *corev1.Event) (*corev1.Event, error) {
	s.writing.RLock()
	defer s.writing.RUnlock()
	return s.sink.Create(e)
}

func (s *trackedSink) Update(e *corev1.Event) (*corev1.Event, error) {
	s.writing.RLock()
	defer s.writing.RUnlock()
	return s.sink.Update(e)
}

func (s *trackedSink) Patch(e *corev1.Event, data []byte) (*corev1.Event, error) {
	s.writing.RLock()
	defer s.writing.RUnlock()
	return s.sink.Patch(e, data)
}
