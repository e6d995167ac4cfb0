package csiconn

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
)

func TestCallBoundsTheCallAndPassesItThrough(t *testing.T) {
	var deadline time.Time
	var hasDeadline bool
	rpc := func(ctx context.Context, req string, _ ...grpc.CallOption) (int, error) {
		deadline, hasDeadline = ctx.Deadline()
		return len(req), nil
	}
	before := time.Now()
	got, err := Call(context.Background(), time.Hour, rpc, "four")
	if err != nil || got != 4 {
		t.Fatalf("Call = %d, %v; want 4, nil", got, err)
	}
	if !hasDeadline || deadline.Before(before.Add(time.Hour)) || deadline.After(time.Now().Add(time.Hour)) {
		t.Errorf("the call's deadline = %v (set %v), want an hour after the call", deadline, hasDeadline)
	}
}
