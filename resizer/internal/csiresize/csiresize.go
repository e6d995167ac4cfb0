// Package csiresize holds the CSI controller calls the resizer makes, ControllerExpandVolume and
// ControllerModifyVolume, each bounded by --timeout, and the classification of their errors.
package csiresize

import (
	"context"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stowage-csi/stowage/shared/csiconn"
)

// Client makes the resizer's CSI calls over one gRPC connection.
type Client csiconn.Bounded[csi.ControllerClient]

// New returns a Client whose every call is bounded by timeout.
func New(controller csi.ControllerClient, timeout time.Duration) *Client {
	return &Client{Client: controller, Timeout: timeout}
}

// Expand calls ControllerExpandVolume and returns the size the driver reports (0 when it reports none) and
// whether the node must expand too.
func (c *Client) Expand(ctx context.Context, req *csi.ControllerExpandVolumeRequest) (int64, bool, error) {
	rsp, err := csiconn.Call(ctx, c.Timeout, c.Client.ControllerExpandVolume, req)
	if err != nil {
		return 0, false, err
	}
	return rsp.GetCapacityBytes(), rsp.GetNodeExpansionRequired(), nil
}

// Modify calls ControllerModifyVolume.
func (c *Client) Modify(ctx context.Context, req *csi.ControllerModifyVolumeRequest) error {
	_, err := csiconn.Call(ctx, c.Timeout, c.Client.ControllerModifyVolume, req)
	return err
}

// IsExpandInfeasible reports whether an expansion error means the requested size can never be reached as
// asked: InvalidArgument, OutOfRange or NotFound, as upstream's util.IsInfeasibleError. Such an expansion is
// retried only after --retry-interval-max, or at once when the user changes the request.
func IsExpandInfeasible(err error) bool {
	switch codeOf(err) {
	case codes.InvalidArgument, codes.OutOfRange, codes.NotFound:
		return true
	}
	return false
}

// IsModifyInfeasible reports whether a modification error makes the class infeasible: InvalidArgument only,
// as upstream's modify controller.
func IsModifyInfeasible(err error) bool { return codeOf(err) == codes.InvalidArgument }

// IsInUse reports whether an expansion error is the driver's "volume is in use, expand it offline"
// (FailedPrecondition), which --handle-volume-inuse-error waits out instead of retrying.
func IsInUse(err error) bool { return codeOf(err) == codes.FailedPrecondition }

// codeOf is err's gRPC code, OK for nil and Unknown for errors that carry none.
func codeOf(err error) codes.Code {
	if err == nil {
		return codes.OK
	}
	st, ok := status.FromError(err)
	if !ok {
		return codes.Unknown
	}
	return st.Code()
}
