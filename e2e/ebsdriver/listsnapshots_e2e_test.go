//go:build e2e

package ebsdriver

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestE2EEBSListSnapshotsPages lists 7 snapshots of a volume (beside another volume's) through ec2sim, which
// pages DescribeSnapshots as EC2 does (MaxResults 5 to 1000, opaque NextToken): for max_entries 2, 5 and 0
// the pages join to exactly the volume's snapshots, none longer than asked, and the walk costs the EC2 pages
// it needs (DescribeSnapshots counted at ec2sim), never a full listing per CSI page. A token that is neither
// the driver's nor EC2's is Aborted.
func TestE2EEBSListSnapshotsPages(t *testing.T) {
	d := controllerDriver(t, "i-0115750000000000a")
	ctx := testContext(t, 2*time.Minute)
	vol := d.createVolume(ctx, volumeRequest("paged", 1, mountCapability(""), nil))
	other := d.createVolume(ctx, volumeRequest("other", 1, mountCapability(""), nil))
	var want []string
	for i := range 7 {
		want = append(want, d.snapshot(ctx, fmt.Sprintf("paged-%d", i), vol))
	}
	d.snapshot(ctx, "other-0", other)
	sort.Strings(want)

	for _, tc := range []struct {
		maxEntries int32
		pages      int
		calls      int // DescribeSnapshots of the walk: EC2 pages of 5 (2 for 7 snapshots), one re-read per offset page
	}{
		{maxEntries: 2, pages: 4, calls: 5},
		{maxEntries: 5, pages: 2, calls: 2},
		{maxEntries: 0, pages: 1, calls: 1},
	} {
		// Calls, not attempts: the SDK's own retry of an answer its transport lost is not the driver's call.
		before := d.sim.Calls("DescribeSnapshots")
		var got []string
		tok, pages := "", 0
		for {
			resp, err := d.ctl.ListSnapshots(ctx, &csi.ListSnapshotsRequest{SourceVolumeId: vol, MaxEntries: tc.maxEntries, StartingToken: tok})
			if err != nil {
				t.Fatalf("max_entries %d, page %d (token %q): %v", tc.maxEntries, pages+1, tok, err)
			}
			pages++
			if tc.maxEntries > 0 && len(resp.GetEntries()) > int(tc.maxEntries) {
				t.Fatalf("max_entries %d: page %d has %d entries", tc.maxEntries, pages, len(resp.GetEntries()))
			}
			for _, e := range resp.GetEntries() {
				if e.GetSnapshot().GetSourceVolumeId() != vol {
					t.Fatalf("max_entries %d: %s of volume %s listed", tc.maxEntries, e.GetSnapshot().GetSnapshotId(), e.GetSnapshot().GetSourceVolumeId())
				}
				got = append(got, e.GetSnapshot().GetSnapshotId())
			}
			if tok = resp.GetNextToken(); tok == "" || pages > 10 {
				break
			}
		}
		sort.Strings(got)
		calls := d.sim.Calls("DescribeSnapshots") - before
		t.Logf("max_entries %d: %d pages, %d DescribeSnapshots", tc.maxEntries, pages, calls)
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Fatalf("max_entries %d listed %v, want %v", tc.maxEntries, got, want)
		}
		if pages != tc.pages || calls != tc.calls {
			t.Fatalf("max_entries %d: %d pages and %d DescribeSnapshots, want %d and %d", tc.maxEntries, pages, calls, tc.pages, tc.calls)
		}
	}

	// One the driver cannot parse, one it hands to EC2 and EC2 refuses.
	for _, tok := range []string{"stowage-offset:9:2:", "not a token!"} {
		_, err := d.ctl.ListSnapshots(ctx, &csi.ListSnapshotsRequest{MaxEntries: 5, StartingToken: tok})
		if status.Code(err) != codes.Aborted {
			t.Fatalf("starting_token %q: %v, want Aborted", tok, err)
		}
	}
}

// snapshot creates a snapshot of the volume and returns its ID; it is deleted when the test ends.
func (d *driver) snapshot(ctx context.Context, name, volumeID string) string {
	d.t.Helper()
	snap, err := d.ctl.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: name, SourceVolumeId: volumeID})
	if err != nil {
		d.t.Fatalf("CreateSnapshot %s of %s: %v", name, volumeID, err)
	}
	id := snap.GetSnapshot().GetSnapshotId()
	d.t.Cleanup(func() { _, _ = d.ctl.DeleteSnapshot(context.Background(), &csi.DeleteSnapshotRequest{SnapshotId: id}) })
	return id
}
