package driver

import (
	"context"
	"fmt"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"

	"github.com/stowage-csi/stowage/ebs-plugin/internal/cloud"
	"github.com/stowage-csi/stowage/ebs-plugin/internal/testutil"
)

// listFake records what ListSnapshots passes to the cloud and answers with a fixed error.
type listFake struct {
	*testutil.FakeCloud
	gotMax   int
	gotToken string
	err      error
}

func (f *listFake) ListSnapshots(_ context.Context, _ string, maxEntries int, token string) ([]*cloud.Snapshot, string, error) {
	f.gotMax, f.gotToken = maxEntries, token
	if f.err != nil {
		return nil, "", f.err
	}
	return []*cloud.Snapshot{{SnapshotID: "snap-1", SourceVolumeID: "vol-1"}}, "next-page", nil
}

func TestListSnapshotsPassesPagingToTheCloud(t *testing.T) {
	d, fc, _ := newTestDriver(t, Options{Mode: ModeController})
	lf := &listFake{FakeCloud: fc}
	d.cloud = lf
	ctx := context.Background()

	resp, err := d.ListSnapshots(ctx, &csi.ListSnapshotsRequest{MaxEntries: 7, StartingToken: "ec2-token", SourceVolumeId: "vol-1"})
	if err != nil || len(resp.GetEntries()) != 1 || resp.GetNextToken() != "next-page" || lf.gotMax != 7 || lf.gotToken != "ec2-token" {
		t.Fatalf("%v %v, passed max %d token %q", resp, err, lf.gotMax, lf.gotToken)
	}

	lf.err = fmt.Errorf("starting token %q: %w", "x", cloud.ErrInvalidToken)
	_, err = d.ListSnapshots(ctx, &csi.ListSnapshotsRequest{StartingToken: "x"})
	wantCode(t, err, codes.Aborted, "starting_token")

	lf.err = fmt.Errorf("%w: 3", cloud.ErrInvalidMaxResults)
	_, err = d.ListSnapshots(ctx, &csi.ListSnapshotsRequest{MaxEntries: 3})
	wantCode(t, err, codes.InvalidArgument, "max_entries")
}
