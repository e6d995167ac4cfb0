// Package signals turns SIGINT and SIGTERM into context cancellation: the first signal starts a graceful
// shutdown (drain work, release the leader lease), a second one exits at once for an operator who is done
// waiting.
package signals

import (
	"context"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"k8s.io/klog/v2"
)

// Context returns a context cancelled by the first SIGINT or SIGTERM. A second signal calls exit(1); nil exit
// means flushing logs and exiting the process. The returned stop function stops listening for signals and
// returns once the goroutine that listened has.
func Context(parent context.Context, exit func(code int)) (context.Context, context.CancelFunc) {
	if exit == nil {
		exit = func(code int) { klog.FlushAndExit(klog.ExitFlushTimeout, code) }
	}
	ctx, cancel := context.WithCancel(parent)
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM)
	done := make(chan struct{})
	var listening sync.WaitGroup
	listening.Go(func() {
		logger := klog.FromContext(parent)
		select {
		case s := <-ch:
			logger.Info("Received signal, shutting down gracefully; send it again to exit immediately", "signal", s.String())
			cancel()
		case <-done:
			return
		}
		select {
		case s := <-ch:
			logger.Info("Received second signal, exiting immediately", "signal", s.String())
			exit(1)
		case <-done:
		}
	})
	var once sync.Once
	stop := func() {
		once.Do(func() {
			signal.Stop(ch)
			close(done)
			listening.Wait()
		})
		cancel()
	}
	return ctx, stop
}
