package sidecarrig

import (
	"context"
	"testing"

	"github.com/stowage-csi/stowage/e2e/rig"
)

// limitWrites and limitWorkers are the server write limit measurement: writes from unthrottled goroutines.
const limitWrites, limitWorkers = 3000, 64

// MeasureWriteLimit measures, in a subtest "server write limit" on a rig of its own started with opts, how
// many writes a second the API server takes from unthrottled clients: the ceiling the storm benchmarks print
// each sidecar's write rate against.
func MeasureWriteLimit(t *testing.T, ctx context.Context, opts Options) rig.WriteLimit {
	t.Helper()
	var limit rig.WriteLimit
	t.Run("server write limit", func(t *testing.T) {
		r := Start(t, opts)
		var err error
		if limit, err = rig.MeasureWriteLimit(ctx, r.Cluster.RESTConfig(), "write-limit", limitWrites, limitWorkers); err != nil {
			t.Fatal(err)
		}
	})
	return limit
}
