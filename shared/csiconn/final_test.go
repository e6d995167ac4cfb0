package csiconn

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestIsFinal(t *testing.T) {
	tests := []struct {
		err  error
		want bool
	}{
		{nil, true},
		{status.Error(codes.InvalidArgument, "x"), true},
		{status.Error(codes.NotFound, "x"), true},
		{status.Error(codes.FailedPrecondition, "x"), true},
		{status.Error(codes.Internal, "x"), true},
		{status.Error(codes.DeadlineExceeded, "x"), false},
		{status.Error(codes.Canceled, "x"), false},
		{status.Error(codes.Unavailable, "x"), false},
		{status.Error(codes.ResourceExhausted, "x"), false},
		{status.Error(codes.Aborted, "x"), false},
		{errors.New("connection reset"), false},
		{fmt.Errorf("wrapped: %w", context.DeadlineExceeded), false},
	}
	for _, tc := range tests {
		if got := IsFinal(tc.err); got != tc.want {
			t.Errorf("IsFinal(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
