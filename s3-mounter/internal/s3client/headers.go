package s3client

import (
	"context"
	"fmt"
	"net"
	"sync/atomic"
	"syscall"

	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"golang.org/x/sys/unix"
)

// requestHeaders are the headers Mountpoint's --requester-pays and --expected-bucket-owner add to every
// S3 request.
func requestHeaders(o Options) map[string]string {
	h := map[string]string{}
	if o.RequesterPays {
		h["x-amz-request-payer"] = "requester"
	}
	if o.ExpectedBucketOwner != "" {
		h["x-amz-expected-bucket-owner"] = o.ExpectedBucketOwner
	}
	return h
}

// setHeaders adds h to every request in the build step, before signing, so the signature covers them.
func setHeaders(h map[string]string) func(*middleware.Stack) error {
	return func(st *middleware.Stack) error {
		return st.Build.Add(middleware.BuildMiddlewareFunc("S3FuseRequestHeaders",
			func(ctx context.Context, in middleware.BuildInput, next middleware.BuildHandler) (middleware.BuildOutput, middleware.Metadata, error) {
				if req, ok := in.Request.(*smithyhttp.Request); ok {
					for k, v := range h {
						req.Header.Set(k, v)
					}
				}
				return next.HandleBuild(ctx, in)
			}), middleware.After)
	}
}

// bindControl binds each new connection to the next of ifaces (SO_BINDTODEVICE), as Mountpoint's --bind
// spreads its connections over the interfaces given. Unknown interfaces fail here, at start-up.
func bindControl(ifaces []string) (func(network, address string, c syscall.RawConn) error, error) {
	for _, name := range ifaces {
		if _, err := net.InterfaceByName(name); err != nil {
			return nil, fmt.Errorf("--bind %s: %w", name, err)
		}
	}
	var next atomic.Uint64
	return func(_, _ string, c syscall.RawConn) error {
		name := ifaces[(next.Add(1)-1)%uint64(len(ifaces))]
		var serr error
		if err := c.Control(func(fd uintptr) {
			serr = unix.SetsockoptString(int(fd), unix.SOL_SOCKET, unix.SO_BINDTODEVICE, name)
		}); err != nil {
			return err
		}
		if serr != nil {
			// Linux before 5.7 needs CAP_NET_RAW for this, as Mountpoint documents.
			return fmt.Errorf("bind to interface %s: %w", name, serr)
		}
		return nil
	}, nil
}
