package s3client

import (
	"context"
	"errors"
	"syscall"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"
)

const errNoEnt = syscall.ENOENT

// codeErrno maps S3 error codes to the errno a file operation returns. Throttling and 5xx reach this
// table only after the SDK retryer gave up.
var codeErrno = map[string]syscall.Errno{
	"NoSuchKey":                    syscall.ENOENT,
	"NotFound":                     syscall.ENOENT,
	"NoSuchBucket":                 syscall.ENOENT,
	"NoSuchUpload":                 syscall.ENOENT,
	"AccessDenied":                 syscall.EACCES,
	"Forbidden":                    syscall.EACCES,
	"AllAccessDisabled":            syscall.EACCES,
	"InvalidAccessKeyId":           syscall.EACCES,
	"SignatureDoesNotMatch":        syscall.EACCES,
	"ExpiredToken":                 syscall.EACCES,
	"InvalidToken":                 syscall.EACCES,
	"InvalidObjectState":           syscall.EACCES,
	"PreconditionFailed":           syscall.ESTALE,
	"InvalidRange":                 syscall.EINVAL,
	"EntityTooLarge":               syscall.EFBIG,
	"EntityTooSmall":               syscall.EINVAL,
	"KeyTooLongError":              syscall.ENAMETOOLONG,
	"SlowDown":                     syscall.EAGAIN,
	"Throttling":                   syscall.EAGAIN,
	"ThrottlingException":          syscall.EAGAIN,
	"RequestLimitExceeded":         syscall.EAGAIN,
	"ServiceUnavailable":           syscall.EAGAIN,
	"InternalError":                syscall.EIO,
	"QuotaExceeded":                syscall.ENOSPC,
	"OperationAborted":             syscall.EAGAIN,
	"RequestTimeout":               syscall.ETIMEDOUT,
	"RequestTimeTooSkewed":         syscall.EACCES,
	"MethodNotAllowed":             syscall.EPERM,
	"NotImplemented":               syscall.ENOSYS,
	"InvalidStorageClass":          syscall.EINVAL,
	"InvalidArgument":              syscall.EINVAL,
	"InvalidRequest":               syscall.EINVAL,
	"KMS.NotFoundException":        syscall.EACCES,
	"KMS.DisabledException":        syscall.EACCES,
	"ObjectLockConfigurationError": syscall.EPERM,
}

// ToErrno maps an error from this package (or the SDK) to the errno the filesystem returns:
// S3 error codes first, then the HTTP status, then context errors; EIO for anything else.
func ToErrno(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno
	}
	var api smithy.APIError
	if errors.As(err, &api) {
		if e, ok := codeErrno[api.ErrorCode()]; ok {
			return e
		}
	}
	var resp *awshttp.ResponseError
	if errors.As(err, &resp) {
		switch code := resp.HTTPStatusCode(); {
		case code == 404:
			return syscall.ENOENT
		case code == 403 || code == 401:
			return syscall.EACCES
		case code == 412:
			return syscall.ESTALE
		case code == 416:
			return syscall.EINVAL
		case code == 429 || code == 503:
			return syscall.EAGAIN
		}
	}
	switch {
	case errors.Is(err, context.Canceled):
		return syscall.EINTR
	case errors.Is(err, context.DeadlineExceeded):
		return syscall.ETIMEDOUT
	}
	return syscall.EIO
}
