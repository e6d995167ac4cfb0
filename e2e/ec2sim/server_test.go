package ec2sim

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"k8s.io/klog/v2/ktesting"

	"github.com/stowage-csi/stowage/e2e/rig"
)

// TestStartStopsWhenContextEnds checks that the end of Start's context closes the server as Close does: the
// endpoint stops answering, and TestMain's leak check sees none of its goroutines left.
func TestStartStopsWhenContextEnds(t *testing.T) {
	logger, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s, err := Start(ctx, Config{DataDir: t.TempDir(), Logger: logger,
		Instances: []Instance{{ID: testInstance, Zone: testZone}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if status, _ := httpDo(t, s, http.MethodGet, "/debug/state", ""); status != http.StatusOK {
		t.Fatalf("GET /debug/state before the context ended: %d", status)
	}
	cancel()
	rig.Eventually(t, ctxT(t), waitTimeout, "the endpoint to close", func(ctx context.Context) (bool, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL()+"/debug/state", nil)
		if err != nil {
			return false, err
		}
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			_ = resp.Body.Close()
			return false, errors.New("still answering")
		}
		return true, nil
	})
}
