package rig

import (
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
)

// EnvCount returns the positive number in the environment variable name, or def when it is unset; a
// benchmark's size or rounds can so be changed without editing it. Anything else fails the test.
func EnvCount(t testing.TB, name string, def int) int {
	t.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	v, err := strconv.Atoi(s)
	if err != nil || v < 1 {
		t.Fatalf("%s=%q is not a positive number", name, s)
	}
	return v
}

// Parallel runs do(0) ... do(n-1) on workers goroutines and returns the first error (all calls run).
func Parallel(n, workers int, do func(i int) error) error {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	work := make(chan int)
	for range max(workers, 1) {
		wg.Go(func() {
			for i := range work {
				if err := do(i); err != nil {
					mu.Lock()
					if first == nil {
						first = fmt.Errorf("item %d: %w", i, err)
					}
					mu.Unlock()
				}
			}
		})
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	return first
}
