package cloud

import (
	"errors"
	"regexp"
	"strings"

	"github.com/aws/smithy-go"
)

// Errors the driver maps to gRPC codes. Wrapped errors carry the EC2 message.
var (
	ErrNotFound            = errors.New("not found")
	ErrAlreadyExists       = errors.New("already exists")
	ErrInvalidArgument     = errors.New("invalid argument")
	ErrLimitExceeded       = errors.New("limit exceeded")
	ErrVolumeInUse         = errors.New("volume in use")
	ErrModificationPending = errors.New("volume modification in progress")
)

// errorCode returns the EC2 error code of err, or "".
func errorCode(err error) string {
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		return apiErr.ErrorCode()
	}
	return ""
}

func isCode(err error, codes ...string) bool {
	code := errorCode(err)
	for _, c := range codes {
		if code == c {
			return true
		}
	}
	return false
}

func isNotFound(err error) bool {
	return strings.HasSuffix(errorCode(err), ".NotFound") || strings.HasSuffix(errorCode(err), ".Malformed")
}

var idPattern = regexp.MustCompile(`\b(?:vol|i|snap)-[0-9a-zA-Z]+\b`)

// namedIDs returns the resource IDs an EC2 NotFound message names, so one bad ID in a batch does not fail the
// others.
func namedIDs(err error) []string {
	var apiErr smithy.APIError
	if !errors.As(err, &apiErr) {
		return nil
	}
	return idPattern.FindAllString(apiErr.ErrorMessage(), -1)
}
