package rig

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MemoryGrowth is the course every memory bench takes: readings with no objects, then for each count the
// objects grown to it, the readings again and the list floor at that count.
type MemoryGrowth struct {
	Counts []int
	// Grow adds the objects numbered from to to-1, as the sidecars find them once their work is done.
	Grow func(from, to int)
	// Measure takes the readings with objects objects in the caches.
	Measure func(objects int) []MemoryRow
	// Lists are the informers' initial LISTs that ListFloor times.
	Lists []func(context.Context) error
}

// Run grows and measures, and returns the rows in the order taken and the list floor at each count.
func (g MemoryGrowth) Run(t testing.TB, ctx context.Context) ([]MemoryRow, map[int]time.Duration) {
	t.Helper()
	rows := g.Measure(0)
	floors := map[int]time.Duration{}
	have := 0
	for _, n := range g.Counts {
		g.Grow(have, n)
		have = n
		rows = append(rows, g.Measure(n)...)
		floor, err := ListFloor(ctx, 3, g.Lists...)
		if err != nil {
			t.Fatal(err)
		}
		floors[n] = floor
	}
	return rows, floors
}

// FloorList is one of ListFloor's lists: list (a typed client's List) as an informer's initial LIST makes it,
// at ResourceVersion "0", served from the watch cache.
func FloorList[L any](list func(context.Context, metav1.ListOptions) (L, error)) func(context.Context) error {
	return func(ctx context.Context) error {
		_, err := list(ctx, metav1.ListOptions{ResourceVersion: "0"})
		return err
	}
}
