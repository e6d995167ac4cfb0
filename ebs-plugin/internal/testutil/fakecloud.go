// Package testutil holds the module's shared test doubles: an in-memory Cloud and a Mounter that records
// calls and keeps a mount table, for table tests of the CSI services.
package testutil

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/stowage-csi/stowage/ebs-plugin/internal/cloud"
)

// FakeCloud is an in-memory EC2 for driver tests. Hooks, when set, run before the operation and may block
// or fail it.
type FakeCloud struct {
	mu        sync.Mutex
	Volumes   map[string]*cloud.Disk
	Snapshots map[string]*cloud.Snapshot
	Instances map[string]bool
	Zones     []string
	Calls     map[string]int
	Created   []cloud.DiskOptions
	Modified  []cloud.ModifyOptions
	next      int

	AttachHook func(ctx context.Context, volumeID, instanceID string) error
	CreateHook func(ctx context.Context, name string) error
	CreateErr  error
}

// NewFakeCloud returns a FakeCloud with zones a-c of us-east-1 and the given instances.
func NewFakeCloud(instances ...string) *FakeCloud {
	f := &FakeCloud{Volumes: map[string]*cloud.Disk{}, Snapshots: map[string]*cloud.Snapshot{}, Instances: map[string]bool{},
		Zones: []string{"us-east-1a", "us-east-1b", "us-east-1c"}, Calls: map[string]int{}}
	for _, i := range instances {
		f.Instances[i] = true
	}
	return f
}

func (f *FakeCloud) count(op string) {
	f.mu.Lock()
	f.Calls[op]++
	f.mu.Unlock()
}

// CallCount returns how often op ran.
func (f *FakeCloud) CallCount(op string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.Calls[op]
}

func (f *FakeCloud) id(prefix string) string {
	f.next++
	return fmt.Sprintf("%s-%017x", prefix, f.next)
}

// AddVolume stores a volume and returns it.
func (f *FakeCloud) AddVolume(d cloud.Disk) *cloud.Disk {
	f.mu.Lock()
	defer f.mu.Unlock()
	if d.VolumeID == "" {
		d.VolumeID = f.id("vol")
	}
	if d.Tags == nil {
		d.Tags = map[string]string{}
	}
	f.Volumes[d.VolumeID] = &d
	return &d
}

// CreateDisk implements driver.Cloud: names are idempotent like EC2 ClientTokens.
func (f *FakeCloud) CreateDisk(ctx context.Context, name string, opts cloud.DiskOptions) (*cloud.Disk, error) {
	f.count("CreateDisk")
	if f.CreateHook != nil {
		if err := f.CreateHook(ctx, name); err != nil {
			return nil, err
		}
	}
	if f.CreateErr != nil {
		return nil, f.CreateErr
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Created = append(f.Created, opts)
	size := int32(cloud.RoundUpGiB(opts.CapacityBytes))
	for _, v := range f.Volumes {
		if v.Tags["CSIVolumeName"] == name {
			if v.CapacityGiB != size {
				return nil, fmt.Errorf("parameters differ: %w", cloud.ErrAlreadyExists)
			}
			return v, nil
		}
	}
	tags := map[string]string{}
	for k, v := range opts.Tags {
		tags[k] = v
	}
	tags["CSIVolumeName"] = name
	d := &cloud.Disk{VolumeID: f.id("vol"), CapacityGiB: size, AvailabilityZone: opts.AvailabilityZone, VolumeType: opts.VolumeType,
		IOPS: opts.IOPS, Throughput: opts.Throughput, MultiAttach: opts.MultiAttach, Encrypted: opts.Encrypted,
		SnapshotID: opts.SnapshotID, OutpostARN: opts.OutpostARN, State: "available", Tags: tags}
	f.Volumes[d.VolumeID] = d
	return d, nil
}

// DeleteDisk implements driver.Cloud.
func (f *FakeCloud) DeleteDisk(_ context.Context, id string) error {
	f.count("DeleteDisk")
	f.mu.Lock()
	defer f.mu.Unlock()
	if v, ok := f.Volumes[id]; ok && len(v.Attachments) > 0 {
		return fmt.Errorf("attached: %w", cloud.ErrVolumeInUse)
	}
	delete(f.Volumes, id)
	return nil
}

// GetDisk implements driver.Cloud.
func (f *FakeCloud) GetDisk(_ context.Context, id string) (*cloud.Disk, error) {
	f.count("GetDisk")
	f.mu.Lock()
	defer f.mu.Unlock()
	v, ok := f.Volumes[id]
	if !ok {
		return nil, fmt.Errorf("volume %s: %w", id, cloud.ErrNotFound)
	}
	c := *v
	return &c, nil
}

// AttachDisk implements driver.Cloud.
func (f *FakeCloud) AttachDisk(ctx context.Context, volID, nodeID string) (string, error) {
	f.count("AttachDisk")
	if f.AttachHook != nil {
		if err := f.AttachHook(ctx, volID, nodeID); err != nil {
			return "", err
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.Instances[nodeID] {
		return "", fmt.Errorf("instance %s: %w", nodeID, cloud.ErrNotFound)
	}
	v, ok := f.Volumes[volID]
	if !ok {
		return "", cloud.ErrNotFound
	}
	for _, a := range v.Attachments {
		if a.InstanceID == nodeID {
			return a.Device, nil
		}
	}
	dev := "/dev/xvda" + string(rune('a'+len(v.Attachments)))
	v.Attachments = append(v.Attachments, cloud.Attachment{InstanceID: nodeID, Device: dev, State: "attached", AttachTime: time.Now()})
	return dev, nil
}

// DetachDisk implements driver.Cloud.
func (f *FakeCloud) DetachDisk(_ context.Context, volID, nodeID string) error {
	f.count("DetachDisk")
	f.mu.Lock()
	defer f.mu.Unlock()
	v, ok := f.Volumes[volID]
	if !ok {
		return nil
	}
	var kept []cloud.Attachment
	for _, a := range v.Attachments {
		if a.InstanceID != nodeID {
			kept = append(kept, a)
		}
	}
	v.Attachments = kept
	return nil
}

// WaitInitialized implements driver.Cloud.
func (f *FakeCloud) WaitInitialized(context.Context, string) error {
	f.count("WaitInitialized")
	return nil
}

// ModifyDisk implements driver.Cloud.
func (f *FakeCloud) ModifyDisk(_ context.Context, id string, opts cloud.ModifyOptions) (int32, error) {
	f.count("ModifyDisk")
	f.mu.Lock()
	defer f.mu.Unlock()
	v, ok := f.Volumes[id]
	if !ok {
		return 0, fmt.Errorf("volume %s: %w", id, cloud.ErrNotFound)
	}
	f.Modified = append(f.Modified, opts)
	if s := int32(cloud.RoundUpGiB(opts.SizeBytes)); s > v.CapacityGiB {
		v.CapacityGiB = s
	}
	if opts.IOPS > 0 {
		v.IOPS = opts.IOPS
	}
	for k, val := range opts.TagsAdd {
		v.Tags[k] = val
	}
	for _, k := range opts.TagsDelete {
		delete(v.Tags, k)
	}
	return v.CapacityGiB, nil
}

// CreateSnapshot implements driver.Cloud.
func (f *FakeCloud) CreateSnapshot(_ context.Context, name, volID string, opts cloud.SnapshotOptions) (*cloud.Snapshot, error) {
	f.count("CreateSnapshot")
	f.mu.Lock()
	defer f.mu.Unlock()
	v, ok := f.Volumes[volID]
	if !ok {
		return nil, fmt.Errorf("volume %s: %w", volID, cloud.ErrNotFound)
	}
	tags := map[string]string{"CSIVolumeSnapshotName": name}
	for k, val := range opts.Tags {
		tags[k] = val
	}
	s := &cloud.Snapshot{SnapshotID: f.id("snap"), SourceVolumeID: volID, SizeGiB: v.CapacityGiB,
		CreationTime: time.Unix(int64(f.next), 0), ReadyToUse: true, Tags: tags}
	f.Snapshots[s.SnapshotID] = s
	return s, nil
}

// DeleteSnapshot implements driver.Cloud.
func (f *FakeCloud) DeleteSnapshot(_ context.Context, id string) error {
	f.count("DeleteSnapshot")
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.Snapshots, id)
	return nil
}

// GetSnapshotByName implements driver.Cloud.
func (f *FakeCloud) GetSnapshotByName(_ context.Context, name string) (*cloud.Snapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, s := range f.Snapshots {
		if s.Tags["CSIVolumeSnapshotName"] == name {
			return s, nil
		}
	}
	return nil, cloud.ErrNotFound
}

// GetSnapshotByID implements driver.Cloud.
func (f *FakeCloud) GetSnapshotByID(_ context.Context, id string) (*cloud.Snapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if s, ok := f.Snapshots[id]; ok {
		return s, nil
	}
	return nil, cloud.ErrNotFound
}

// ListSnapshots implements driver.Cloud with offset tokens.
func (f *FakeCloud) ListSnapshots(_ context.Context, volID string, maxEntries int, token string) ([]*cloud.Snapshot, string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var all []*cloud.Snapshot
	for _, s := range f.Snapshots {
		if volID == "" || s.SourceVolumeID == volID {
			all = append(all, s)
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].SnapshotID < all[j].SnapshotID })
	off := 0
	if token != "" {
		n, err := strconv.Atoi(token)
		if err != nil || n > len(all) {
			return nil, "", cloud.ErrInvalidArgument
		}
		off = n
	}
	end, next := len(all), ""
	if maxEntries > 0 && off+maxEntries < len(all) {
		end, next = off+maxEntries, strconv.Itoa(off+maxEntries)
	}
	return all[off:end], next, nil
}

// AvailabilityZones implements driver.Cloud.
func (f *FakeCloud) AvailabilityZones(context.Context) ([]string, error) { return f.Zones, nil }
