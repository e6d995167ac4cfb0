package ec2sim

import (
	"fmt"
	"net/http"
	"strings"
)

// apiError is an EC2 error answer: the code and message the SDK surfaces as smithy.APIError, and the HTTP
// status EC2 sends it with (the SDK's retryer looks at both).
type apiError struct {
	Status  int
	Code    string
	Message string
}

func (e *apiError) Error() string { return e.Code + ": " + e.Message }

func newError(status int, code, format string, args ...any) *apiError {
	return &apiError{Status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

func errInvalidValue(format string, args ...any) *apiError {
	return newError(http.StatusBadRequest, "InvalidParameterValue", format, args...)
}

func errCombination(format string, args ...any) *apiError {
	return newError(http.StatusBadRequest, "InvalidParameterCombination", format, args...)
}

func errMissing(param string) *apiError {
	return newError(http.StatusBadRequest, "MissingParameter", "The request must contain the parameter %s", param)
}

func errBadParam(param, value string) *apiError {
	return errInvalidValue("Value (%s) for parameter %s is invalid.", value, param)
}

func errIncorrectState(format string, args ...any) *apiError {
	return newError(http.StatusBadRequest, "IncorrectState", format, args...)
}

func errDryRun() *apiError {
	return newError(http.StatusPreconditionFailed, "DryRunOperation", "Request would have succeeded, but DryRun flag is set.")
}

func errThrottled() *apiError {
	return newError(http.StatusServiceUnavailable, "RequestLimitExceeded", "Request limit exceeded.")
}

func errInternal() *apiError {
	return newError(http.StatusInternalServerError, "InternalError", "An internal error has occurred.")
}

// errNotFound names every missing ID, as EC2 does, so callers can tell which members of a batch are gone.
func errNotFound(code, noun string, ids []string) *apiError {
	if len(ids) == 1 {
		return newError(http.StatusBadRequest, code, "The %s '%s' does not exist.", noun, ids[0])
	}
	return newError(http.StatusBadRequest, code, "The %ss '%s' do not exist.", noun, strings.Join(ids, ", "))
}

func errVolumeNotFound(ids ...string) *apiError {
	return errNotFound("InvalidVolume.NotFound", "volume", ids)
}

func errSnapshotNotFound(ids ...string) *apiError {
	return errNotFound("InvalidSnapshot.NotFound", "snapshot", ids)
}

func errInstanceNotFound(ids ...string) *apiError {
	return errNotFound("InvalidInstanceID.NotFound", "instance ID", ids)
}
