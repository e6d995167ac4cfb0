package rig

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// ListFloor is the time to synced of a client that does nothing but its initial LISTs: lists run at once, as
// a sidecar's informers start together, each doing the LIST an informer's first one is (ResourceVersion "0",
// served from the API server's watch cache) and decoding the objects. No sidecar syncs faster on the same
// server and machine, so a time to synced is read against it. The figure is the median of rounds rounds.
func ListFloor(ctx context.Context, rounds int, lists ...func(context.Context) error) (time.Duration, error) {
	if rounds < 1 || len(lists) == 0 {
		return 0, fmt.Errorf("list floor: want at least one round and one list, got %d and %d", rounds, len(lists))
	}
	took := make([]time.Duration, 0, rounds)
	for range rounds {
		start := time.Now()
		if err := Parallel(len(lists), len(lists), func(i int) error { return lists[i](ctx) }); err != nil {
			return 0, fmt.Errorf("list floor: %w", err)
		}
		took = append(took, time.Since(start))
	}
	slices.Sort(took)
	return took[len(took)/2], nil
}

// ListFloorLine is one line for under a memory table: the list floor at each count, in seconds.
func ListFloorLine(what string, floors map[int]time.Duration) string {
	counts := make([]int, 0, len(floors))
	for n := range floors {
		counts = append(counts, n)
	}
	slices.Sort(counts)
	parts := make([]string, 0, len(counts))
	for _, n := range counts {
		parts = append(parts, fmt.Sprintf("%d objects %.2f s", n, floors[n].Seconds()))
	}
	return fmt.Sprintf("list floor (%s, all at once, from the watch cache, medians of 3): %s", what, strings.Join(parts, ", "))
}

// WriteListFloor prints ListFloorLine to w.
func WriteListFloor(w io.Writer, what string, floors map[int]time.Duration) {
	fmt.Fprintln(w, ListFloorLine(what, floors))
}

// FloorClient is a client of cfg's server for ListFloor's lists of built-in kinds: protobuf, which the API
// server encodes and a client decodes faster than JSON, and no client-side rate limiter.
func FloorClient(cfg *rest.Config) (kubernetes.Interface, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst, cfg.RateLimiter = -1, 0, nil
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	return kubernetes.NewForConfig(cfg)
}
