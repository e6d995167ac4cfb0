package ownwrites

import (
	"context"

	"github.com/stowage-csi/stowage/shared/patch"
)

// Retry is patch.RetryOnConflict that records each write in w: write runs on obj and, after a conflict, on the
// copy get re-reads, and every write it makes is marked, so the watch events of the caller's own writes do not
// bring back a copy from before them.
func Retry[T patch.Object](ctx context.Context, w *Writes, obj T, get func(context.Context) (T, error),
	write func(context.Context, T) (T, error)) (T, error) {
	return patch.RetryOnConflict(ctx, obj, get, func(ctx context.Context, cur T) (T, error) {
		out, err := write(ctx, cur)
		if err == nil {
			w.Wrote(cur, out)
		}
		return out, err
	})
}
