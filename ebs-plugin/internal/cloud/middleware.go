package cloud

import (
	"context"
	"time"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/smithy-go/middleware"

	"github.com/stowage-csi/stowage/ebs-plugin/internal/metrics"
)

// metricsMiddleware records every request (after retries) and every throttled attempt.
func metricsMiddleware(rec *metrics.Recorder) func(*middleware.Stack) error {
	return func(stack *middleware.Stack) error {
		if rec == nil {
			return nil
		}
		err := stack.Initialize.Add(middleware.InitializeMiddlewareFunc("StowageRequestMetrics",
			func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				start := time.Now()
				out, md, err := next.HandleInitialize(ctx, in)
				code := ""
				if err != nil {
					if code = errorCode(err); code == "" {
						code = "Unknown"
					}
				}
				rec.ObserveRequest(awsmiddleware.GetOperationName(ctx), time.Since(start), code)
				return out, md, err
			}), middleware.Before)
		if err != nil {
			return err
		}
		// After the Retry middleware, so each attempt is seen.
		return stack.Finalize.Insert(middleware.FinalizeMiddlewareFunc("StowageThrottleMetrics",
			func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
				out, md, err := next.HandleFinalize(ctx, in)
				if err != nil {
					if _, ok := retry.DefaultThrottleErrorCodes[errorCode(err)]; ok {
						rec.ObserveThrottle(awsmiddleware.GetOperationName(ctx))
					}
				}
				return out, md, err
			}), "Retry", middleware.After)
	}
}
