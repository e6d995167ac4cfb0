package csiconn

import (
	"context"
	"time"

	"google.golang.org/grpc"
)

// Bounded is a CSI service client (csi.ControllerClient, csi.GroupControllerClient) whose every call, made with
// Call, is bounded by Timeout: what each sidecar's package of CSI calls is built on.
type Bounded[C any] struct {
	Client  C
	Timeout time.Duration
}

// Call makes one CSI call bounded by timeout (--timeout), for the clients of the sidecars' CSI calls: a driver
// that hangs fails the call, and the worker retries with backoff, instead of holding the worker forever.
func Call[Req, Rsp any](ctx context.Context, timeout time.Duration, rpc func(context.Context, Req, ...grpc.CallOption) (Rsp, error), req Req) (Rsp, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return rpc(ctx, req)
}
