package provision

import (
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// slowError marks a failure that retrying soon will not fix (bad StorageClass parameters, InvalidArgument from the
// driver): the controller waits --retry-interval-max before the next try instead of backing off from 1 s, so a
// broken class cannot cause a storm of CreateVolume calls and Events.
type slowError struct{ err error }

func (e *slowError) Error() string { return e.err.Error() }
func (e *slowError) Unwrap() error { return e.err }

func slow(err error) error { return &slowError{err: err} }

// IsSlow reports whether err should be retried only after the maximum retry interval.
func IsSlow(err error) bool {
	var s *slowError
	return errors.As(err, &s)
}

// maybeInProgress reports whether a CSI error leaves the operation possibly still running in the driver: a
// timeout or cancellation ends only our wait, Unavailable and Aborted may come after the driver started the
// work, and an error that is not a gRPC status says nothing of what the driver did. ResourceExhausted is final for CreateVolume: the driver could not place the volume. Unknown is treated as
// "maybe running" too (upstream: final), because assuming "no volume" after it is what leaks.
func maybeInProgress(err error) bool {
	st, ok := status.FromError(err)
	if !ok {
		return true
	}
	switch st.Code() {
	case codes.Canceled, codes.DeadlineExceeded, codes.Unavailable, codes.Aborted, codes.Unknown:
		return true
	}
	return false
}

func isCode(err error, c codes.Code) bool {
	st, ok := status.FromError(err)
	return ok && st.Code() == c
}

// Slow marks err as one to retry only after the maximum retry interval.
func Slow(err error) error { return slow(err) }

// errSelectorNotSupported is upstream's refusal of claims with spec.selector, word for word.
var errSelectorNotSupported = errors.New("claim Selector is not supported")
