//go:build e2e

package ebsstack

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
)

// chaosSnapshots snapshots each volume through ebs-plugin's CSI controller as csi-snapshotter does:
// CreateSnapshot with a fixed name until the snapshot is ready, every failure or timeout retried, while
// the caller's kill plan kills the controller; then DeleteSnapshot until it succeeds. Every retried create
// must find the snapshot it made before (by name), so EC2 must hold exactly one snapshot per volume once all
// are ready, and none after the deletes.
func chaosSnapshots(ctx context.Context, s *Stack, prefix string, volumes []string) error {
	ctrl, closeCtrl, err := dialController(s.ControllerSocket)
	if err != nil {
		return err
	}
	defer closeCtrl()
	ids := make([]string, len(volumes))
	errs := make([]error, len(volumes))
	var wg sync.WaitGroup
	for i, vol := range volumes {
		wg.Go(func() {
			req := &csi.CreateSnapshotRequest{Name: fmt.Sprintf("%s%d", prefix, i), SourceVolumeId: vol}
			errs[i] = retryCSI(ctx, "CreateSnapshot "+req.Name, func(ctx context.Context) (bool, error) {
				resp, err := ctrl.CreateSnapshot(ctx, req)
				if err != nil {
					return false, err
				}
				ids[i] = resp.GetSnapshot().GetSnapshotId()
				return resp.GetSnapshot().GetReadyToUse(), nil
			})
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	var got []string
	for _, sn := range s.EC2.State().Snapshots {
		got = append(got, sn.ID+" of "+sn.VolumeID)
		if !slices.Contains(ids, sn.ID) {
			return fmt.Errorf("EC2 holds snapshot %s of %s that no CreateSnapshot returned (returned %v): a retry made a second one", sn.ID, sn.VolumeID, ids)
		}
	}
	if len(got) != len(volumes) {
		return fmt.Errorf("EC2 holds snapshots %v, want one of each of %v", got, volumes)
	}
	for _, id := range ids {
		err := retryCSI(ctx, "DeleteSnapshot "+id, func(ctx context.Context) (bool, error) {
			_, err := ctrl.DeleteSnapshot(ctx, &csi.DeleteSnapshotRequest{SnapshotId: id})
			return err == nil, err
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// retryCSI calls call, each attempt bounded to 10 s, until it reports done or ctx ends; errors are retried
// as a sidecar would (a killed controller answers Unavailable until it is back).
func retryCSI(ctx context.Context, what string, call func(ctx context.Context) (bool, error)) error {
	return poll(ctx, what, func(ctx context.Context) (bool, string, error) {
		callCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		done, err := call(callCtx)
		return done, fmt.Sprintf("last error: %v", err), nil
	})
}

// snapshotVolumes picks up to n volume IDs, in a stable order, from the claims' volumes.
func snapshotVolumes(t *testing.T, volumes map[string]string, n int) []string {
	t.Helper()
	ids := slices.Sorted(maps.Keys(volumes))
	if len(ids) < n {
		t.Fatalf("%d volumes to snapshot, want %d", len(ids), n)
	}
	return ids[:n]
}
