package csiconn

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// IsFinal reports whether a CSI call's error means the operation surely did not happen and is not still
// running in the driver. Canceled, DeadlineExceeded, Unavailable, ResourceExhausted, Aborted and errors
// without a gRPC code mean the call may still be in progress, so its outcome is unknown and the caller must
// call again (or keep its intent recorded) rather than forget it: every upstream sidecar draws the line here
// (external-attacher's isFinalError, external-resizer's util.IsFinalError, csi-snapshotter's isCSIFinalError).
func IsFinal(err error) bool {
	if err == nil {
		return true
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return false
	}
	st, ok := status.FromError(err)
	if !ok {
		return false
	}
	switch st.Code() {
	case codes.Canceled, codes.DeadlineExceeded, codes.Unavailable, codes.ResourceExhausted, codes.Aborted:
		return false
	}
	return true
}
