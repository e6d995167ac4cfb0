package events

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
)

// client-go's correlator turns each repetition of an Event (same object, type, reason, message; or, past ten
// similar ones, the aggregate) into a PATCH of its count: a retry loop on one object costs a write per retry.
// coalescingSink holds those PATCHes instead: the first occurrence is created at once, the repetitions of the next
// window become one PATCH carrying the last count, sent when the window ends (or at Shutdown). The correlator's
// state is kept right by answering each held PATCH with the Event as it will be.

// coalescingSink is a record.EventSink that coalesces the count updates of repeated Events.
type coalescingSink struct {
	sink   record.EventSink
	window time.Duration
	logger klog.Logger

	mu sync.Mutex
	// held is, per Event (namespace/name), the last count update not sent yet.
	held    map[string]heldPatch
	timer   *time.Timer
	stopped bool
	// writing is held (read-locked) by each write to the API server, so Shutdown can wait for the one in
	// flight: client-go's Shutdown does not, and a write still running after it would outlive its owner.
	writing sync.RWMutex
}

type heldPatch struct {
	event *corev1.Event
	data  []byte
}

func newCoalescingSink(ctx context.Context, sink record.EventSink, window time.Duration) *coalescingSink {
	return &coalescingSink{sink: sink, window: window, logger: klog.FromContext(ctx), held: map[string]heldPatch{}}
}

func (s *coalescingSink) Create(e *corev1.Event) (*corev1.Event, error) {
	s.writing.RLock()
	defer s.writing.RUnlock()
	return s.sink.Create(e)
}

func (s *coalescingSink) Update(e *corev1.Event) (*corev1.Event, error) {
	s.writing.RLock()
	defer s.writing.RUnlock()
	return s.sink.Update(e)
}

// Patch holds the count update until the window ends; a later one for the same Event replaces it.
func (s *coalescingSink) Patch(e *corev1.Event, data []byte) (*corev1.Event, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.window <= 0 || s.stopped {
		s.writing.RLock()
		defer s.writing.RUnlock()
		return s.sink.Patch(e, data)
	}
	s.held[e.Namespace+"/"+e.Name] = heldPatch{event: e.DeepCopy(), data: data}
	if s.timer == nil {
		s.timer = time.AfterFunc(s.window, s.flush)
	}
	return e, nil
}

// flush sends the held count updates, one PATCH per Event; an Event that expired meanwhile is created again with
// its count, as client-go does for a PATCH that finds none.
func (s *coalescingSink) flush() {
	s.mu.Lock()
	held := s.held
	s.held, s.timer = map[string]heldPatch{}, nil
	s.mu.Unlock()
	s.writing.RLock()
	defer s.writing.RUnlock()
	for _, h := range held {
		_, err := s.sink.Patch(h.event, h.data)
		if apierrors.IsNotFound(err) {
			h.event.ResourceVersion = ""
			_, err = s.sink.Create(h.event)
		}
		if err != nil {
			s.logger.V(4).Info("Event count update dropped", "event", h.event.Namespace+"/"+h.event.Name, "err", err)
		}
	}
}

// stop sends what is held and waits for the write in flight, if any.
func (s *coalescingSink) stop() {
	s.mu.Lock()
	s.stopped = true
	if s.timer != nil {
		s.timer.Stop()
	}
	s.mu.Unlock()
	s.flush()
	s.writing.Lock()
	defer s.writing.Unlock()
}
