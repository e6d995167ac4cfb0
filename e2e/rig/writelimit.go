package rig

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// WriteLimit is what an API server took from unthrottled writers: Writes requests (half creates, half
// patches of the objects just created) in Elapsed. A sidecar's write rate is compared with it to tell
// whether the sidecar or the server bounds a storm.
type WriteLimit struct {
	Writes, Workers int
	Elapsed         time.Duration
	// CreatesPerSecond and PatchesPerSecond are the rates of the two halves.
	CreatesPerSecond, PatchesPerSecond float64
}

// PerSecond is the server's write rate, creates and patches together.
func (l WriteLimit) PerSecond() float64 { return perSecond(l.Writes, l.Elapsed) }

// Fraction is rate (writes/s) as a fraction of the server's rate; 0 when nothing was measured.
func (l WriteLimit) Fraction(rate float64) float64 {
	if l.PerSecond() == 0 {
		return 0
	}
	return rate / l.PerSecond()
}

// String is one line for a benchmark's output.
func (l WriteLimit) String() string {
	return fmt.Sprintf("API server write limit: %.0f writes/s (%d writes from %d unthrottled goroutines in %.1f s: creates %.0f/s, merge patches %.0f/s)",
		l.PerSecond(), l.Writes, l.Workers, l.Elapsed.Seconds(), l.CreatesPerSecond, l.PatchesPerSecond)
}

func perSecond(n int, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// MeasureWriteLimit measures the API server of cfg with workers goroutines sharing one client that has no
// client-side rate limiter (QPS -1): n ConfigMaps created in namespace ns (created if missing), then each
// patched once, timed apart. The ConfigMaps are deleted afterwards, untimed. ConfigMaps are small and
// watched by nothing a test runs, so what is measured is the server's (and etcd's) write path.
func MeasureWriteLimit(ctx context.Context, cfg *rest.Config, ns string, n, workers int) (WriteLimit, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst, cfg.RateLimiter = -1, 0, nil
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return WriteLimit{}, err
	}
	return measureWrites(ctx, client, ns, n, workers)
}

// measureWrites is MeasureWriteLimit with a given client.
func measureWrites(ctx context.Context, client kubernetes.Interface, ns string, n, workers int) (WriteLimit, error) {
	if n < 1 || workers < 1 {
		return WriteLimit{}, fmt.Errorf("write limit: want at least one write and one worker, got %d and %d", n, workers)
	}
	_, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return WriteLimit{}, fmt.Errorf("write limit: namespace %s: %w", ns, err)
	}
	cms := client.CoreV1().ConfigMaps(ns)
	name := func(i int) string { return fmt.Sprintf("write-limit-%06d", i) }
	start := time.Now()
	err = Parallel(n, workers, func(i int) error {
		_, err := cms.Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: name(i)},
			Data:       map[string]string{"n": fmt.Sprint(i)},
		}, metav1.CreateOptions{})
		return err
	})
	created := time.Since(start)
	if err != nil {
		return WriteLimit{}, fmt.Errorf("write limit: create: %w", err)
	}
	patch := []byte(`{"metadata":{"annotations":{"rig.stowage-csi.io/patched":"yes"}}}`)
	start = time.Now()
	err = Parallel(n, workers, func(i int) error {
		_, err := cms.Patch(ctx, name(i), types.MergePatchType, patch, metav1.PatchOptions{})
		return err
	})
	patched := time.Since(start)
	if err != nil {
		return WriteLimit{}, fmt.Errorf("write limit: patch: %w", err)
	}
	if err := Parallel(n, workers, func(i int) error { return cms.Delete(ctx, name(i), metav1.DeleteOptions{}) }); err != nil {
		return WriteLimit{}, fmt.Errorf("write limit: clean up: %w", err)
	}
	return WriteLimit{
		Writes: 2 * n, Workers: workers, Elapsed: created + patched,
		CreatesPerSecond: perSecond(n, created), PatchesPerSecond: perSecond(n, patched),
	}, nil
}
