//go:build e2e

package ebsdriver

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stowage-csi/stowage/e2e/ec2sim"
)

// TestE2EEBSAccountQuotas: when the account's EBS quotas are used up, CreateVolume and CreateSnapshot fail
// with RESOURCE_EXHAUSTED carrying EC2's own explanation (so the provisioner's and snapshotter's Events tell
// the user which quota), nothing is left half made, and the same requests succeed once the quota allows.
func TestE2EEBSAccountQuotas(t *testing.T) {
	d := controllerDriver(t, "i-0a00c0000000000aa")
	ctx := testContext(t, 2*time.Minute)
	d.sim.SetQuotas(ec2sim.Quotas{StorageGiB: map[string]int64{"gp3": 3}, Snapshots: 1})
	gp3 := func(name string) *csi.CreateVolumeRequest {
		return volumeRequest(name, 2, mountCapability(""), map[string]string{"type": "gp3"})
	}
	id := d.createVolume(ctx, gp3("quota-1"))

	_, err := d.ctl.CreateVolume(ctx, gp3("quota-2"))
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "maximum gp3 storage limit of 3 GiB") {
		t.Fatalf("CreateVolume beyond the quota = %v, want ResourceExhausted naming the gp3 storage limit", err)
	}
	if n := len(d.sim.State().Volumes); n != 1 {
		t.Errorf("%d volumes in EC2 after the refused create, want 1", n)
	}

	snap := func(name string) (*csi.CreateSnapshotResponse, error) {
		return d.ctl.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: name, SourceVolumeId: id})
	}
	s1, err := snap("quota-snap-1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = d.ctl.DeleteSnapshot(context.Background(), &csi.DeleteSnapshotRequest{SnapshotId: s1.GetSnapshot().GetSnapshotId()})
	})
	if _, err := snap("quota-snap-2"); status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "maximum number of snapshots") {
		t.Fatalf("CreateSnapshot beyond the quota = %v, want ResourceExhausted", err)
	}

	// A raised quota lets the same request through (the provisioner retries it as is).
	d.sim.SetQuotas(ec2sim.Quotas{})
	second := d.createVolume(ctx, gp3("quota-2"))
	// EC2 deletes a volume that has snapshots; the snapshot goes in the cleanup.
	d.deleteVolume(ctx, second)
	d.deleteVolume(ctx, id)
}
