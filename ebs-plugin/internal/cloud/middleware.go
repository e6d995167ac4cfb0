package cloud

import (
	"context"
	"time"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/smithy-go/middleware"

	"github.com/stowage-csi/stowage/ebs-plugin/internal/metrics"
)

// metricsMiddleware records every HTTP attempt, after the Retry middleware as upstream does: a success's
// duration (of that attempt alone), a throttle, or another error code EC2 answered. An attempt that got no
// answer from EC2 (a network error) has no code and is not counted, as upstream.
func metricsMiddleware(rec *metrics.Recorder) func(*middleware.Stack) error {
	return func(stack *middleware.Stack) error {
		if rec == nil {
			return nil
		}
		return stack.Finalize.Insert(middleware.FinalizeMiddlewareFunc("StowageRequestMetrics",
			func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
				start := time.Now()
				out, md, err := next.HandleFinalize(ctx, in)
				op := awsmiddleware.GetOperationName(ctx)
				if op == "" {
					op = "Unknown"
				}
				switch code := errorCode(err); {
				case err == nil:
					rec.ObserveSuccess(op, time.Since(start))
				case code == "":
				case isThrottle(code):
					rec.ObserveThrottle(op)
				default:
					rec.ObserveError(op, code)
				}
				return out, md, err
			}), "Retry", middleware.After)
	}
}

func isThrottle(code string) bool {
	_, ok := retry.DefaultThrottleErrorCodes[code]
	return ok
}
