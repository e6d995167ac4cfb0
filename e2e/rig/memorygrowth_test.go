package rig

import (
	"context"
	"fmt"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestMemoryGrowthMeasuresEmptyThenAfterEachGrowth(t *testing.T) {
	var steps []string
	lists := 0
	g := MemoryGrowth{
		Counts: []int{10, 100},
		Grow:   func(from, to int) { steps = append(steps, fmt.Sprintf("grow %d-%d", from, to)) },
		Measure: func(objects int) []MemoryRow {
			steps = append(steps, fmt.Sprintf("measure %d", objects))
			return []MemoryRow{{Sidecar: "a", Objects: objects}, {Sidecar: "b", Objects: objects}}
		},
		Lists: []func(context.Context) error{func(context.Context) error { lists++; return nil }},
	}
	rows, floors := g.Run(t, context.Background())
	want := []string{"measure 0", "grow 0-10", "measure 10", "grow 10-100", "measure 100"}
	if !slices.Equal(steps, want) {
		t.Errorf("steps = %v, want %v", steps, want)
	}
	var objects []int
	for _, r := range rows {
		objects = append(objects, r.Objects)
	}
	if !slices.Equal(objects, []int{0, 0, 10, 10, 100, 100}) {
		t.Errorf("rows' objects = %v, want two rows at each of 0, 10 and 100", objects)
	}
	if _, ok := floors[0]; ok || len(floors) != 2 {
		t.Errorf("floors = %v, want one at each of 10 and 100", floors)
	}
	if lists != 6 {
		t.Errorf("%d lists, want 3 rounds at each of 2 counts", lists)
	}
}

func TestFloorListListsFromTheWatchCache(t *testing.T) {
	var got metav1.ListOptions
	list := FloorList(func(_ context.Context, opts metav1.ListOptions) (*struct{}, error) {
		got = opts
		return nil, nil
	})
	if err := list(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got.ResourceVersion != "0" {
		t.Errorf("ResourceVersion = %q, want \"0\"", got.ResourceVersion)
	}
}
