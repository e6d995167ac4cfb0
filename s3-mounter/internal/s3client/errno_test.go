package s3client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"syscall"
	"testing"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

func httpErr(status int) error {
	return &awshttp.ResponseError{ResponseError: &smithyhttp.ResponseError{
		Response: &smithyhttp.Response{Response: &http.Response{StatusCode: status}},
		Err:      errors.New("http error"),
	}}
}

func TestToErrnoMapsS3Errors(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want syscall.Errno
	}{
		{"nil", nil, 0},
		{"NoSuchKey", &smithy.GenericAPIError{Code: "NoSuchKey"}, syscall.ENOENT},
		{"HEAD NotFound", &smithy.GenericAPIError{Code: "NotFound"}, syscall.ENOENT},
		{"NoSuchBucket", &smithy.GenericAPIError{Code: "NoSuchBucket"}, syscall.ENOENT},
		{"AccessDenied", &smithy.GenericAPIError{Code: "AccessDenied"}, syscall.EACCES},
		{"bad signature", &smithy.GenericAPIError{Code: "SignatureDoesNotMatch"}, syscall.EACCES},
		{"unknown key id", &smithy.GenericAPIError{Code: "InvalidAccessKeyId"}, syscall.EACCES},
		{"etag changed", &smithy.GenericAPIError{Code: "PreconditionFailed"}, syscall.ESTALE},
		{"range", &smithy.GenericAPIError{Code: "InvalidRange"}, syscall.EINVAL},
		{"throttled after retries", &smithy.GenericAPIError{Code: "SlowDown"}, syscall.EAGAIN},
		{"too large", &smithy.GenericAPIError{Code: "EntityTooLarge"}, syscall.EFBIG},
		{"server error", &smithy.GenericAPIError{Code: "InternalError"}, syscall.EIO},
		{"wrapped code", fmt.Errorf("head: %w", &smithy.GenericAPIError{Code: "AccessDenied"}), syscall.EACCES},
		{"unknown code falls back to HTTP 404", errors.Join(&smithy.GenericAPIError{Code: "Weird"}, httpErr(404)), syscall.ENOENT},
		{"HTTP 403 without code", httpErr(403), syscall.EACCES},
		{"HTTP 503", httpErr(503), syscall.EAGAIN},
		{"HTTP 500", httpErr(500), syscall.EIO},
		{"errno passes through", fmt.Errorf("x: %w", syscall.EINVAL), syscall.EINVAL},
		{"cancelled", context.Canceled, syscall.EINTR},
		{"deadline", fmt.Errorf("get: %w", context.DeadlineExceeded), syscall.ETIMEDOUT},
		{"anything else", errors.New("connection reset"), syscall.EIO},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := ToErrno(tc.err); got != tc.want {
				t.Errorf("ToErrno(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}

func TestIsNotFound(t *testing.T) {
	if !IsNotFound(&smithy.GenericAPIError{Code: "NoSuchKey"}) || IsNotFound(&smithy.GenericAPIError{Code: "AccessDenied"}) {
		t.Error("IsNotFound misclassifies")
	}
}
