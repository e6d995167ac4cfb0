// Package csiattach holds the CSI controller calls the attacher makes: ControllerPublishVolume,
// ControllerUnpublishVolume and a paged ListVolumes, each bounded by the --timeout flag.
package csiattach

import (
	"context"

	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Client makes the attacher's CSI calls over one gRPC connection.
type Client struct {
	controller csi.ControllerClient
	timeout    time.Duration
	maxEntries int32
}

// New returns a Client. timeout bounds every single call (one ListVolumes page, not the whole listing);
// maxEntries is the ListVolumes page size, 0 letting the driver choose.
func New(controller csi.ControllerClient, timeout time.Duration, maxEntries int32) *Client {
	return &Client{controller: controller, timeout: timeout, maxEntries: maxEntries}
}

// Publish calls ControllerPublishVolume and returns the publish context.
func (c *Client) Publish(ctx context.Context, req *csi.ControllerPublishVolumeRequest) (map[string]string, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	rsp, err := c.controller.ControllerPublishVolume(ctx, req)
	if err != nil {
		return nil, err
	}
	return rsp.GetPublishContext(), nil
}

// Unpublish calls ControllerUnpublishVolume.
func (c *Client) Unpublish(ctx context.Context, req *csi.ControllerUnpublishVolumeRequest) error {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	_, err := c.controller.ControllerUnpublishVolume(ctx, req)
	return err
}

// ListPublished pages through ListVolumes and returns, per volume ID, the node IDs the driver reports the
// volume published to. Each page has its own timeout, so a large listing does not hit DeadlineExceeded
// as a whole (upstream bounds the whole listing by one --timeout).
func (c *Client) ListPublished(ctx context.Context) (map[string][]string, error) {
	published := map[string][]string{}
	token := ""
	for {
		page, err := c.listPage(ctx, token)
		if err != nil {
			return nil, err
		}
		for _, entry := range page.GetEntries() {
			id := entry.GetVolume().GetVolumeId()
			if id == "" {
				continue
			}
			published[id] = append(published[id], entry.GetStatus().GetPublishedNodeIds()...)
		}
		token = page.GetNextToken()
		if token == "" {
			return published, nil
		}
	}
}

func (c *Client) listPage(ctx context.Context, token string) (*csi.ListVolumesResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	return c.controller.ListVolumes(ctx, &csi.ListVolumesRequest{MaxEntries: c.maxEntries, StartingToken: token})
}

// Code returns the gRPC code of err, and false for errors that carry none.
func Code(err error) (codes.Code, bool) {
	st, ok := status.FromError(err)
	if !ok || err == nil {
		return codes.Unknown, false
	}
	return st.Code(), true
}
