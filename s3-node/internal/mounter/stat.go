package mounter

import (
	"context"
	"sync"

	"k8s.io/klog/v2"
)

// stats runs at most one stat per source mount at a time. A stat of a FUSE mount whose server hangs never
// returns and its goroutine cannot be stopped; without this each retried publish on a hung mount would leave
// one more of them behind.
type stats struct {
	mu      sync.Mutex
	running map[string]*statCall
}

// statCall is one stat of a source; every caller that comes while it runs waits on the same one.
type statCall struct {
	done chan struct{} // closed once err is set
	err  error
}

// stat returns the stat of source still running, or starts one.
func (m *Mounter) stat(ctx context.Context, source string) *statCall {
	m.stats.mu.Lock()
	defer m.stats.mu.Unlock()
	if c, ok := m.stats.running[source]; ok {
		klog.FromContext(ctx).V(2).Info("A stat of the source mount is still running; waiting on it", "source", source)
		return c
	}
	c := &statCall{done: make(chan struct{})}
	m.stats.running[source] = c
	go func() {
		err := m.cfg.Sys.Stat(source)
		m.stats.mu.Lock()
		if m.stats.running[source] == c {
			delete(m.stats.running, source)
		}
		m.stats.mu.Unlock()
		c.err = err
		close(c.done)
	}()
	return c
}

// forgetStat makes the next stat of source start afresh: once a mount is unmounted, a stat still running
// is about it, not about whatever is mounted there next.
func (m *Mounter) forgetStat(source string) {
	m.stats.mu.Lock()
	defer m.stats.mu.Unlock()
	delete(m.stats.running, source)
}
