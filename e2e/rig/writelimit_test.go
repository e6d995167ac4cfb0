package rig

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// TestMeasureWritesDoesEachWriteOnceAndCleansUp checks the writes the rate is computed from were all made: n
// creates and n patches, counted by the client, and that nothing is left in the namespace.
func TestMeasureWritesDoesEachWriteOnceAndCleansUp(t *testing.T) {
	client := fake.NewClientset()
	var creates, patches atomic.Int64
	client.PrependReactor("create", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
		creates.Add(1)
		return false, nil, nil
	})
	client.PrependReactor("patch", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
		patches.Add(1)
		return false, nil, nil
	})
	ctx := context.Background()
	l, err := measureWrites(ctx, client, "limit", 100, 8)
	if err != nil {
		t.Fatal(err)
	}
	if creates.Load() != 100 || patches.Load() != 100 {
		t.Errorf("%d creates and %d patches, want 100 of each", creates.Load(), patches.Load())
	}
	if l.Writes != 200 || l.Workers != 8 || l.Elapsed <= 0 || l.PerSecond() <= 0 || l.CreatesPerSecond <= 0 || l.PatchesPerSecond <= 0 {
		t.Errorf("measured %+v, want 200 writes from 8 workers at a positive rate", l)
	}
	left, err := client.CoreV1().ConfigMaps("limit").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(left.Items) != 0 {
		t.Errorf("%d ConfigMaps left after the measurement", len(left.Items))
	}
	// A second measurement in the same namespace works: the namespace may exist.
	if _, err := measureWrites(ctx, client, "limit", 10, 2); err != nil {
		t.Errorf("second measurement: %v", err)
	}
}

func TestMeasureWritesRejectsNothingToDo(t *testing.T) {
	for _, c := range []struct{ n, workers int }{{0, 4}, {10, 0}} {
		if _, err := measureWrites(context.Background(), fake.NewClientset(), "limit", c.n, c.workers); err == nil {
			t.Errorf("n=%d workers=%d: no error", c.n, c.workers)
		}
	}
}

func TestWriteLimitFraction(t *testing.T) {
	l := WriteLimit{Writes: 2000, Elapsed: 2 * time.Second}
	if got := l.PerSecond(); got != 1000 {
		t.Errorf("PerSecond = %v, want 1000", got)
	}
	if got := l.Fraction(250); got != 0.25 {
		t.Errorf("Fraction(250) = %v, want 0.25", got)
	}
	if got := (WriteLimit{}).Fraction(250); got != 0 {
		t.Errorf("Fraction with nothing measured = %v, want 0", got)
	}
}
