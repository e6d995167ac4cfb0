package driver

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/stowage-csi/stowage/ebs-plugin/internal/cloud"
	sharedtestutil "github.com/stowage-csi/stowage/shared/testutil"
)

func TestCreateVolume(t *testing.T) {
	tests := []struct {
		name      string
		req       *csi.CreateVolumeRequest
		opts      Options
		wantCode  codes.Code
		wantInMsg []string
		check     func(t *testing.T, v *csi.Volume, created cloud.DiskOptions)
	}{
		{
			name: "defaults: gp3, 100 GiB, first zone, driver tags",
			req:  &csi.CreateVolumeRequest{Name: "pvc-1", VolumeCapabilities: []*csi.VolumeCapability{mountCap("")}},
			check: func(t *testing.T, v *csi.Volume, c cloud.DiskOptions) {
				if c.VolumeType != "gp3" || c.CapacityBytes != 100*gib || c.AvailabilityZone != "us-east-1a" {
					t.Errorf("created %+v", c)
				}
				if c.Tags["CSIVolumeName"] != "pvc-1" || c.Tags["ebs.csi.aws.com/cluster"] != "true" {
					t.Errorf("tags %v", c.Tags)
				}
				// Upstream's keys today: the well-known zone only.
				if seg := v.GetAccessibleTopology()[0].GetSegments(); v.GetCapacityBytes() != 100*gib || len(seg) != 1 || seg[WellKnownZoneTopologyKey] != "us-east-1a" {
					t.Errorf("volume %+v", v)
				}
			},
		},
		{
			name: "size rounds up to GiB; preferred topology before requisite; PVC tags and cluster tags",
			opts: Options{KubernetesClusterID: "prod", ExtraTags: map[string]string{"team": "storage"}},
			req: &csi.CreateVolumeRequest{Name: "pvc-2", VolumeCapabilities: []*csi.VolumeCapability{mountCap("xfs")},
				CapacityRange: &csi.CapacityRange{RequiredBytes: gib + 1},
				Parameters: map[string]string{"csi.storage.k8s.io/pvc/name": "data", "csi.storage.k8s.io/pvc/namespace": "db",
					"tagSpecification_1": "ns={{ .PVCNamespace }}", "blockSize": "4096"},
				AccessibilityRequirements: &csi.TopologyRequirement{
					Requisite: []*csi.Topology{{Segments: map[string]string{ZoneTopologyKey: "us-east-1c"}}},
					Preferred: []*csi.Topology{{Segments: map[string]string{WellKnownZoneTopologyKey: "us-east-1b"}}},
				}},
			check: func(t *testing.T, v *csi.Volume, c cloud.DiskOptions) {
				if c.CapacityBytes != 2*gib || c.AvailabilityZone != "us-east-1b" {
					t.Errorf("created %+v", c)
				}
				want := map[string]string{"team": "storage", "ns": "db", "kubernetes.io/created-for/pvc/name": "data",
					"kubernetes.io/cluster/prod": "owned", "KubernetesCluster": "prod", "Name": "prod-dynamic-pvc-2",
					"ebs.csi.aws.com/cluster-name": "prod"}
				for k, val := range want {
					if c.Tags[k] != val {
						t.Errorf("tag %s = %q, want %q", k, c.Tags[k], val)
					}
				}
				if v.GetVolumeContext()["blocksize"] != "4096" {
					t.Errorf("volume context %v", v.GetVolumeContext())
				}
			},
		},
		{
			name: "mutable parameters override the class",
			req: &csi.CreateVolumeRequest{Name: "pvc-3", VolumeCapabilities: []*csi.VolumeCapability{mountCap("")},
				Parameters: map[string]string{"type": "gp3", "iops": "3000"}, MutableParameters: map[string]string{"iops": "4000", "throughput": "200"}},
			check: func(t *testing.T, _ *csi.Volume, c cloud.DiskOptions) {
				if c.IOPS != 4000 || c.Throughput != 200 {
					t.Errorf("created %+v", c)
				}
			},
		},
		{name: "no name", req: &csi.CreateVolumeRequest{VolumeCapabilities: []*csi.VolumeCapability{mountCap("")}}, wantCode: codes.InvalidArgument, wantInMsg: []string{"name"}},
		{name: "no capabilities", req: &csi.CreateVolumeRequest{Name: "x"}, wantCode: codes.InvalidArgument, wantInMsg: []string{"volume_capabilities"}},
		{name: "unknown parameter", req: &csi.CreateVolumeRequest{Name: "x", VolumeCapabilities: []*csi.VolumeCapability{mountCap("")},
			Parameters: map[string]string{"speed": "fast"}}, wantCode: codes.InvalidArgument, wantInMsg: []string{"speed", "fast"}},
		{name: "reserved tag in template", req: &csi.CreateVolumeRequest{Name: "x", VolumeCapabilities: []*csi.VolumeCapability{mountCap("")},
			Parameters: map[string]string{"tagSpecification_1": "CSIVolumeName=mine"}}, wantCode: codes.InvalidArgument, wantInMsg: []string{"CSIVolumeName"}},
		{name: "unknown mutable parameter", req: &csi.CreateVolumeRequest{Name: "x", VolumeCapabilities: []*csi.VolumeCapability{mountCap("")},
			MutableParameters: map[string]string{"color": "red"}}, wantCode: codes.InvalidArgument, wantInMsg: []string{"color"}},
		{name: "required above limit", req: &csi.CreateVolumeRequest{Name: "x", VolumeCapabilities: []*csi.VolumeCapability{mountCap("")},
			CapacityRange: &csi.CapacityRange{RequiredBytes: 3 * gib, LimitBytes: 2 * gib}}, wantCode: codes.OutOfRange, wantInMsg: []string{"limit_bytes"}},
		{name: "rounding exceeds limit", req: &csi.CreateVolumeRequest{Name: "x", VolumeCapabilities: []*csi.VolumeCapability{mountCap("")},
			CapacityRange: &csi.CapacityRange{RequiredBytes: gib + 1, LimitBytes: gib + 2}}, wantCode: codes.OutOfRange},
		{name: "multi-attach needs io2", req: &csi.CreateVolumeRequest{Name: "x",
			VolumeCapabilities: []*csi.VolumeCapability{blockCap(csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER)}},
			wantCode: codes.InvalidArgument, wantInMsg: []string{"io2"}},
		{name: "single-node multi-writer is not advertised", req: &csi.CreateVolumeRequest{Name: "x",
			VolumeCapabilities: []*csi.VolumeCapability{blockCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER)}},
			wantCode: codes.InvalidArgument, wantInMsg: []string{"SINGLE_NODE_MULTI_WRITER"}},
		{name: "multi-node reader is not EBS", req: &csi.CreateVolumeRequest{Name: "x",
			VolumeCapabilities: []*csi.VolumeCapability{blockCap(csi.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY)}},
			wantCode: codes.InvalidArgument, wantInMsg: []string{"MULTI_NODE_READER_ONLY"}},
		{name: "unknown fs type", req: &csi.CreateVolumeRequest{Name: "x", VolumeCapabilities: []*csi.VolumeCapability{mountCap("zfs")}},
			wantCode: codes.InvalidArgument, wantInMsg: []string{"zfs"}},
		{name: "missing source snapshot", req: &csi.CreateVolumeRequest{Name: "x", VolumeCapabilities: []*csi.VolumeCapability{mountCap("")},
			VolumeContentSource: &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Snapshot{Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: "snap-0fff"}}}},
			wantCode: codes.NotFound, wantInMsg: []string{"snap-0fff"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, fc, _ := newTestDriver(t, tc.opts)
			resp, err := d.CreateVolume(context.Background(), tc.req)
			if tc.wantCode != codes.OK {
				wantCode(t, err, tc.wantCode, tc.wantInMsg...)
				if n := fc.CallCount("CreateDisk"); n != 0 {
					t.Errorf("rejected request created %d volumes", n)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, resp.GetVolume(), fc.Created[0])
		})
	}
}

func TestCreateVolumeConcurrentDuplicateIsAborted(t *testing.T) {
	d, fc, _ := newTestDriver(t, Options{})
	entered, unblock := make(chan struct{}), make(chan struct{})
	fc.CreateHook = func(ctx context.Context, name string) error {
		close(entered)
		<-unblock
		return nil
	}
	req := &csi.CreateVolumeRequest{Name: "dup", VolumeCapabilities: []*csi.VolumeCapability{mountCap("")}}
	done := make(chan error)
	go func() { _, err := d.CreateVolume(context.Background(), req); done <- err }()
	<-entered
	_, err := d.CreateVolume(context.Background(), req)
	wantCode(t, err, codes.Aborted, "dup")
	close(unblock)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestCreateVolumeMapsCloudErrors(t *testing.T) {
	for err, code := range map[error]codes.Code{
		fmt.Errorf("x: %w", cloud.ErrAlreadyExists):   codes.AlreadyExists,
		fmt.Errorf("x: %w", cloud.ErrLimitExceeded):   codes.ResourceExhausted,
		fmt.Errorf("x: %w", cloud.ErrInvalidArgument): codes.InvalidArgument,
		errors.New("boom"):                            codes.Internal,
		context.DeadlineExceeded:                      codes.DeadlineExceeded,
	} {
		d, fc, _ := newTestDriver(t, Options{})
		fc.CreateErr = err
		_, got := d.CreateVolume(context.Background(), &csi.CreateVolumeRequest{Name: "v", VolumeCapabilities: []*csi.VolumeCapability{mountCap("")}})
		wantCode(t, got, code)
	}
}

func TestDeleteVolume(t *testing.T) {
	d, fc, _ := newTestDriver(t, Options{})
	v := fc.AddVolume(cloud.Disk{CapacityGiB: 1})
	tests := []struct {
		id   string
		code codes.Code
	}{
		{id: "", code: codes.InvalidArgument},
		{id: "not-a-volume", code: codes.OK},
		{id: v.VolumeID, code: codes.OK},
		{id: v.VolumeID, code: codes.OK}, // again: already gone
	}
	for _, tc := range tests {
		_, err := d.DeleteVolume(context.Background(), &csi.DeleteVolumeRequest{VolumeId: tc.id})
		wantCode(t, err, tc.code)
	}
	if len(fc.Volumes) != 0 {
		t.Fatal("volume not deleted")
	}
}

func TestControllerPublishVolume(t *testing.T) {
	d, fc, _ := newTestDriver(t, Options{})
	v := fc.AddVolume(cloud.Disk{CapacityGiB: 1})
	elsewhere := fc.AddVolume(cloud.Disk{CapacityGiB: 1, Attachments: []cloud.Attachment{{InstanceID: "i-0ther", State: "attached"}}})
	free := fc.AddVolume(cloud.Disk{CapacityGiB: 1})
	tests := []struct {
		name     string
		req      *csi.ControllerPublishVolumeRequest
		wantCode codes.Code
		inMsg    []string
	}{
		{name: "attaches", req: &csi.ControllerPublishVolumeRequest{VolumeId: v.VolumeID, NodeId: testNode, VolumeCapability: mountCap("")}},
		{name: "again is idempotent", req: &csi.ControllerPublishVolumeRequest{VolumeId: v.VolumeID, NodeId: testNode, VolumeCapability: mountCap("")}},
		{name: "no volume id", req: &csi.ControllerPublishVolumeRequest{NodeId: testNode, VolumeCapability: mountCap("")}, wantCode: codes.InvalidArgument, inMsg: []string{"volume_id"}},
		{name: "no node id", req: &csi.ControllerPublishVolumeRequest{VolumeId: v.VolumeID, VolumeCapability: mountCap("")}, wantCode: codes.InvalidArgument, inMsg: []string{"node_id"}},
		{name: "no capability", req: &csi.ControllerPublishVolumeRequest{VolumeId: v.VolumeID, NodeId: testNode}, wantCode: codes.InvalidArgument, inMsg: []string{"volume_capability"}},
		{name: "unknown volume", req: &csi.ControllerPublishVolumeRequest{VolumeId: "vol-0fff", NodeId: testNode, VolumeCapability: mountCap("")}, wantCode: codes.NotFound, inMsg: []string{"vol-0fff"}},
		{name: "unknown node", req: &csi.ControllerPublishVolumeRequest{VolumeId: free.VolumeID, NodeId: "i-0fff", VolumeCapability: mountCap("")}, wantCode: codes.NotFound, inMsg: []string{"i-0fff"}},
		{name: "attached elsewhere", req: &csi.ControllerPublishVolumeRequest{VolumeId: elsewhere.VolumeID, NodeId: testNode, VolumeCapability: mountCap("")}, wantCode: codes.FailedPrecondition, inMsg: []string{"i-0ther"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := d.ControllerPublishVolume(context.Background(), tc.req)
			if tc.wantCode != codes.OK {
				wantCode(t, err, tc.wantCode, tc.inMsg...)
				return
			}
			if err != nil || resp.GetPublishContext()[DevicePathKey] != "/dev/xvdaa" {
				t.Fatalf("resp %v, err %v", resp, err)
			}
		})
	}
}

func TestControllerUnpublishCancelsInProgressPublish(t *testing.T) {
	d, fc, _ := newTestDriver(t, Options{})
	v := fc.AddVolume(cloud.Disk{CapacityGiB: 1})
	attaching := make(chan struct{})
	fc.AttachHook = func(ctx context.Context, _, _ string) error {
		close(attaching)
		<-ctx.Done() // a slow attach, only the cancel ends it
		return ctx.Err()
	}
	published := make(chan error)
	go func() {
		_, err := d.ControllerPublishVolume(context.Background(), &csi.ControllerPublishVolumeRequest{VolumeId: v.VolumeID, NodeId: testNode, VolumeCapability: mountCap("")})
		published <- err
	}()
	<-attaching
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := d.ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{VolumeId: v.VolumeID, NodeId: testNode}); err != nil {
		t.Fatalf("unpublish: %v", err)
	}
	wantCode(t, <-published, codes.Aborted, "cancelled")
	if fc.CallCount("DetachDisk") != 1 {
		t.Fatalf("detach calls = %d", fc.CallCount("DetachDisk"))
	}
}

func TestExpandAndModifyAreCoalesced(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	const window = time.Second
	d, fc, _ := newTestDriver(t, Options{ModifyVolumeWindow: window, Clock: clk})
	v := fc.AddVolume(cloud.Disk{CapacityGiB: 1, VolumeType: "gp3"})
	type expandResult struct {
		resp *csi.ControllerExpandVolumeResponse
		err  error
	}
	expanded, modified := make(chan expandResult, 1), make(chan error, 1)
	go func() {
		resp, err := d.ControllerExpandVolume(context.Background(), &csi.ControllerExpandVolumeRequest{VolumeId: v.VolumeID,
			CapacityRange: &csi.CapacityRange{RequiredBytes: 3 * gib}, VolumeCapability: mountCap("")})
		expanded <- expandResult{resp, err}
	}()
	waitModifyCallers(t, d, v.VolumeID, 1)
	go func() {
		_, err := d.ControllerModifyVolume(context.Background(), &csi.ControllerModifyVolumeRequest{VolumeId: v.VolumeID,
			MutableParameters: map[string]string{"iops": "5000", "tagSpecification_1": "tier=gold"}})
		modified <- err
	}()
	waitModifyCallers(t, d, v.VolumeID, 2)
	// Another IOPS value conflicts with the open window: refused at once, the window stays open.
	_, conflictErr := d.ControllerModifyVolume(context.Background(), &csi.ControllerModifyVolumeRequest{VolumeId: v.VolumeID,
		MutableParameters: map[string]string{"iops": "6000"}})
	wantCode(t, conflictErr, codes.Aborted, "iops")
	if n := fc.CallCount("ModifyDisk"); n != 0 {
		t.Fatalf("ModifyDisk ran %d times before the window closed", n)
	}
	clk.Step(window)
	e := <-expanded
	if err := <-modified; e.err != nil || err != nil {
		t.Fatalf("expand %v, modify %v", e.err, err)
	}
	if len(fc.Modified) != 1 {
		t.Fatalf("ModifyDisk ran %d times, want 1", len(fc.Modified))
	}
	m := fc.Modified[0]
	if m.SizeBytes != 3*gib || m.IOPS != 5000 || m.TagsAdd["tier"] != "gold" {
		t.Fatalf("merged %+v", m)
	}
	if e.resp.GetCapacityBytes() != 3*gib || !e.resp.GetNodeExpansionRequired() {
		t.Fatalf("expand response %+v", e.resp)
	}
}

// waitModifyCallers returns once n requests wait in the modification window of volumeID.
func waitModifyCallers(t *testing.T, d *Driver, volumeID string, n int) {
	t.Helper()
	sharedtestutil.Eventually(t, time.Minute, fmt.Sprintf("%d requests in the modification window of %s", n, volumeID), func() (bool, error) {
		if w := d.modifier.Waiting(volumeID); w != n {
			return false, fmt.Errorf("%d waiting", w)
		}
		return true, nil
	})
}

func TestControllerExpandAndModifyValidation(t *testing.T) {
	d, _, _ := newTestDriver(t, Options{})
	_, err := d.ControllerExpandVolume(context.Background(), &csi.ControllerExpandVolumeRequest{VolumeId: "vol-1"})
	wantCode(t, err, codes.InvalidArgument, "capacity_range")
	_, err = d.ControllerExpandVolume(context.Background(), &csi.ControllerExpandVolumeRequest{VolumeId: "vol-0fff", CapacityRange: &csi.CapacityRange{RequiredBytes: gib}})
	wantCode(t, err, codes.NotFound, "vol-0fff")
	_, err = d.ControllerModifyVolume(context.Background(), &csi.ControllerModifyVolumeRequest{VolumeId: "vol-1", MutableParameters: map[string]string{"XXX": "y"}})
	wantCode(t, err, codes.InvalidArgument, "XXX")
	_, err = d.ControllerModifyVolume(context.Background(), &csi.ControllerModifyVolumeRequest{VolumeId: "vol-1", MutableParameters: map[string]string{"tagDeletion_1": "CSIVolumeName"}})
	wantCode(t, err, codes.InvalidArgument, "reserved")
}

func TestSnapshots(t *testing.T) {
	d, fc, _ := newTestDriver(t, Options{})
	v := fc.AddVolume(cloud.Disk{CapacityGiB: 4})
	other := fc.AddVolume(cloud.Disk{CapacityGiB: 4})
	ctx := context.Background()
	first, err := d.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: "snap-a", SourceVolumeId: v.VolumeID,
		Parameters: map[string]string{"tagSpecification_1": "who={{ .VolumeSnapshotName }}", "csi.storage.k8s.io/volumesnapshot/name": "nightly"}})
	if err != nil {
		t.Fatal(err)
	}
	if s := fc.Snapshots[first.GetSnapshot().GetSnapshotId()]; s.Tags["who"] != "nightly" || s.Tags["ebs.csi.aws.com/cluster"] != "true" {
		t.Fatalf("tags %v", s.Tags)
	}
	again, err := d.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: "snap-a", SourceVolumeId: v.VolumeID})
	if err != nil || again.GetSnapshot().GetSnapshotId() != first.GetSnapshot().GetSnapshotId() {
		t.Fatalf("repeat: %v %v", again, err)
	}
	_, err = d.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: "snap-a", SourceVolumeId: other.VolumeID})
	wantCode(t, err, codes.AlreadyExists, other.VolumeID)
	_, err = d.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: "snap-b", SourceVolumeId: v.VolumeID, Parameters: map[string]string{"fastSnapshotRestoreAvailabilityZones": "mars-1a"}})
	wantCode(t, err, codes.InvalidArgument, "mars-1a")
	_, err = d.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: "snap-c", SourceVolumeId: "vol-0fff"})
	wantCode(t, err, codes.NotFound, "vol-0fff")
	snapD, err := d.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: "snap-d", SourceVolumeId: v.VolumeID})
	if err != nil {
		t.Fatal(err)
	}

	list, err := d.ListSnapshots(ctx, &csi.ListSnapshotsRequest{MaxEntries: 1})
	if err != nil || len(list.GetEntries()) != 1 || list.GetNextToken() == "" {
		t.Fatalf("page 1: %v %v", list, err)
	}
	list2, err := d.ListSnapshots(ctx, &csi.ListSnapshotsRequest{MaxEntries: 1, StartingToken: list.GetNextToken()})
	if err != nil || len(list2.GetEntries()) != 1 || list2.GetNextToken() != "" {
		t.Fatalf("page 2: %v %v", list2, err)
	}
	_, err = d.ListSnapshots(ctx, &csi.ListSnapshotsRequest{StartingToken: "bogus"})
	wantCode(t, err, codes.Aborted, "bogus")
	byID, err := d.ListSnapshots(ctx, &csi.ListSnapshotsRequest{SnapshotId: "snap-0fff"})
	if err != nil || len(byID.GetEntries()) != 0 {
		t.Fatalf("unknown id: %v %v", byID, err)
	}
	if _, err := d.DeleteSnapshot(ctx, &csi.DeleteSnapshotRequest{SnapshotId: first.GetSnapshot().GetSnapshotId()}); err != nil {
		t.Fatal(err)
	}
	got, err := d.GetSnapshot(ctx, &csi.GetSnapshotRequest{SnapshotId: snapD.GetSnapshot().GetSnapshotId()})
	if err != nil || got.GetSnapshot().GetSourceVolumeId() != v.VolumeID {
		t.Fatalf("GetSnapshot: %v %v", got, err)
	}
	_, err = d.GetSnapshot(ctx, &csi.GetSnapshotRequest{SnapshotId: first.GetSnapshot().GetSnapshotId()})
	wantCode(t, err, codes.NotFound, first.GetSnapshot().GetSnapshotId())
	_, err = d.DeleteSnapshot(ctx, &csi.DeleteSnapshotRequest{})
	wantCode(t, err, codes.InvalidArgument, "snapshot_id")
}

func TestValidateVolumeCapabilities(t *testing.T) {
	d, fc, _ := newTestDriver(t, Options{})
	v := fc.AddVolume(cloud.Disk{CapacityGiB: 1})
	resp, err := d.ValidateVolumeCapabilities(context.Background(), &csi.ValidateVolumeCapabilitiesRequest{VolumeId: v.VolumeID, VolumeCapabilities: []*csi.VolumeCapability{mountCap("ext4")}})
	if err != nil || resp.GetConfirmed() == nil {
		t.Fatalf("%v %v", resp, err)
	}
	resp, err = d.ValidateVolumeCapabilities(context.Background(), &csi.ValidateVolumeCapabilitiesRequest{VolumeId: v.VolumeID,
		VolumeCapabilities: []*csi.VolumeCapability{blockCap(csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER)}})
	if err != nil || resp.GetConfirmed() != nil || resp.GetMessage() == "" {
		t.Fatalf("multi-attach on a plain volume confirmed: %v %v", resp, err)
	}
	_, err = d.ValidateVolumeCapabilities(context.Background(), &csi.ValidateVolumeCapabilitiesRequest{VolumeId: "vol-0fff", VolumeCapabilities: []*csi.VolumeCapability{mountCap("")}})
	wantCode(t, err, codes.NotFound)
	_, err = d.ValidateVolumeCapabilities(context.Background(), &csi.ValidateVolumeCapabilitiesRequest{VolumeId: v.VolumeID})
	wantCode(t, err, codes.InvalidArgument, "volume_capabilities")
}

func TestIdentity(t *testing.T) {
	d, _, _ := newTestDriver(t, Options{Version: "v9"})
	info, _ := d.GetPluginInfo(context.Background(), nil)
	if info.GetName() != "ebs.csi.aws.com" || info.GetVendorVersion() != "v9" {
		t.Fatal(info)
	}
	caps, _ := d.GetPluginCapabilities(context.Background(), nil)
	if len(caps.GetCapabilities()) != 3 {
		t.Fatal(caps)
	}
	p, _ := d.Probe(context.Background(), nil)
	if !p.GetReady().GetValue() {
		t.Fatal("not ready")
	}
}

func TestWarnOnInvalidTagSkipsInsteadOfFailing(t *testing.T) {
	req := &csi.CreateVolumeRequest{Name: "w", VolumeCapabilities: []*csi.VolumeCapability{mountCap("")},
		Parameters: map[string]string{"tagSpecification_1": "bad={{ .Nope }}", "tagSpecification_2": "good=yes"}}
	d, fc, _ := newTestDriver(t, Options{WarnOnInvalidTag: true})
	if _, err := d.CreateVolume(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if tags := fc.Created[0].Tags; tags["good"] != "yes" || tags["bad"] != "" {
		t.Fatalf("tags %v", tags)
	}
	strict, _, _ := newTestDriver(t, Options{})
	_, err := strict.CreateVolume(context.Background(), req)
	wantCode(t, err, codes.InvalidArgument, "Nope")
}

func TestValidID(t *testing.T) {
	for id, want := range map[string]bool{"vol-0123abc": true, "vol-": false, "vol-0/../x": false, "snap-1": false, "": false, "vol-" + strings.Repeat("a", 33): false} {
		if got := validVolumeID(id); got != want {
			t.Errorf("validVolumeID(%q) = %t", id, got)
		}
	}
}

// TestTagTemplatesWarnOnInvalidTag checks that --extra-tags values reach volumes and snapshots as written
// (upstream templates class tags only), and that --warn-on-invalid-tag skips a bad snapshot-class tag as it
// does a storage-class one; without it both fail.
func TestTagTemplatesWarnOnInvalidTag(t *testing.T) {
	extra := map[string]string{"team": "storage", "ns": "{{ .PVCNamespace }}"}
	badSnapParams := map[string]string{"tagSpecification_1": "who={{ .VolumeSnapshotName }}", "tagSpecification_2": "bad={{ .PVCName }}",
		"csi.storage.k8s.io/volumesnapshot/name": "nightly"}
	volParams := map[string]string{"csi.storage.k8s.io/pvc/namespace": "db", "tagSpecification_1": "bad={{ js .PVCName }}"}
	for _, warn := range []bool{false, true} {
		d, fc, _ := newTestDriver(t, Options{ExtraTags: extra, WarnOnInvalidTag: warn})
		ctx := context.Background()
		src := fc.AddVolume(cloud.Disk{CapacityGiB: 4})
		snap, err := d.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: "snap-a", SourceVolumeId: src.VolumeID, Parameters: badSnapParams})
		vol, verr := d.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "pvc-1", VolumeCapabilities: []*csi.VolumeCapability{mountCap("")}, Parameters: volParams})
		if !warn {
			wantCode(t, err, codes.InvalidArgument, "PVCName")
			wantCode(t, verr, codes.InvalidArgument, "js")
			continue
		}
		if err != nil || verr != nil {
			t.Fatalf("with --warn-on-invalid-tag: snapshot %v, volume %v", err, verr)
		}
		gotSnap := fc.Snapshots[snap.GetSnapshot().GetSnapshotId()].Tags
		if gotSnap["who"] != "nightly" || gotSnap["team"] != "storage" || gotSnap["bad"] != "" || gotSnap["ns"] != "{{ .PVCNamespace }}" {
			t.Errorf("snapshot tags %v", gotSnap)
		}
		gotVol := fc.Volumes[vol.GetVolume().GetVolumeId()].Tags
		if gotVol["ns"] != "{{ .PVCNamespace }}" || gotVol["team"] != "storage" || gotVol["bad"] != "" {
			t.Errorf("volume tags %v", gotVol)
		}
	}
}
