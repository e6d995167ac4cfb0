package cloud

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/smithy-go/logging"
	"k8s.io/klog/v2"
)

// sdkDebugLogging makes the SDK log every EC2 request and response, bodies included, and every retry
// (--aws-sdk-debug-log). The entries go to the klog logger of the call's context, so they carry the CSI
// request's method and volume. Requests are logged after signing: the Authorization header holds a
// signature, not the secret key.
func sdkDebugLogging(o *ec2.Options) {
	o.ClientLogMode = aws.LogRequestWithBody | aws.LogResponseWithBody | aws.LogRetries
	o.Logger = sdkLogger{logger: klog.Background()}
}

// sdkLogger adapts klog to the SDK's logger.
type sdkLogger struct{ logger klog.Logger }

// Logf implements logging.Logger.
func (l sdkLogger) Logf(classification logging.Classification, format string, v ...any) {
	l.logger.Info("AWS SDK", "classification", string(classification), "message", fmt.Sprintf(format, v...))
}

// WithContext implements logging.ContextLogger: the SDK calls it with each request's context.
func (l sdkLogger) WithContext(ctx context.Context) logging.Logger {
	return sdkLogger{logger: klog.FromContext(ctx)}
}
