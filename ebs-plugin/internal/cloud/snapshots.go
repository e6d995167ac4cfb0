package cloud

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"k8s.io/klog/v2"
)

// SnapshotOptions describe a snapshot to create.
type SnapshotOptions struct {
	Tags       map[string]string
	OutpostARN string
	FSRZones   []string
	Lock       *LockOptions
}

// LockOptions lock a snapshot against deletion.
type LockOptions struct {
	Mode           string
	DurationDays   int32
	ExpirationDate *time.Time
	CoolOffHours   int32
}

// CreateSnapshot snapshots the volume, tagged with name. FSR and locks are applied afterwards; if either
// fails the snapshot is deleted again so no half-configured snapshot is left behind.
func (c *Cloud) CreateSnapshot(ctx context.Context, name, volumeID string, opts SnapshotOptions) (*Snapshot, error) {
	tags := map[string]string{}
	for k, v := range opts.Tags {
		tags[k] = v
	}
	tags[tagSnapshotName] = name
	in := &ec2.CreateSnapshotInput{
		VolumeId:          aws.String(volumeID),
		Description:       aws.String("Created by AWS EBS CSI driver for volume " + volumeID),
		TagSpecifications: []types.TagSpecification{{ResourceType: types.ResourceTypeSnapshot, Tags: toTags(tags)}},
	}
	if opts.OutpostARN != "" {
		in.OutpostArn = aws.String(opts.OutpostARN)
	}
	// CreateSnapshot has no ClientToken: an SDK retry after a 500 or a closed connection could make a second
	// snapshot when EC2 made the first and only its answer was lost. So only throttling (never carried out)
	// is retried here; any other failure is settled by looking the snapshot up by its name tag.
	out, err := c.ec2.CreateSnapshot(ctx, in, c.retryers.throttleOnly("CreateSnapshot"))
	var snap *Snapshot
	switch {
	case err == nil:
		snap = snapshotFrom(types.Snapshot{SnapshotId: out.SnapshotId, VolumeId: out.VolumeId, VolumeSize: out.VolumeSize,
			StartTime: out.StartTime, State: out.State, Tags: out.Tags})
	case isCode(err, "InvalidVolume.NotFound"):
		return nil, fmt.Errorf("%w: %w", ErrNotFound, err)
	case isCode(err, "SnapshotLimitExceeded", "SnapshotCreationPerVolumeRateExceeded"):
		return nil, fmt.Errorf("%w: %w", ErrLimitExceeded, err)
	default:
		// The call's own deadline may be what failed it; the lookup gets a short one of its own.
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		found, lerr := c.GetSnapshotByName(lctx, name)
		cancel()
		if lerr != nil || found.SourceVolumeID != volumeID {
			// Not made (or not visible yet): the caller's retry looks it up by name again before creating.
			return nil, fmt.Errorf("create snapshot of %s: %w", volumeID, err)
		}
		klog.FromContext(ctx).Info("CreateSnapshot failed but EC2 made the snapshot; using it", "snapshotID", found.SnapshotID, "err", err)
		snap = found
	}
	if len(opts.FSRZones) > 0 {
		if err := c.enableFSR(ctx, snap.SnapshotID, opts.FSRZones); err != nil {
			return nil, c.undoSnapshot(ctx, snap.SnapshotID, err)
		}
	}
	if opts.Lock != nil {
		lin := &ec2.LockSnapshotInput{SnapshotId: aws.String(snap.SnapshotID), LockMode: types.LockMode(opts.Lock.Mode)}
		if opts.Lock.DurationDays > 0 {
			lin.LockDuration = aws.Int32(opts.Lock.DurationDays)
		}
		if opts.Lock.ExpirationDate != nil {
			lin.ExpirationDate = opts.Lock.ExpirationDate
		}
		if opts.Lock.CoolOffHours > 0 {
			lin.CoolOffPeriod = aws.Int32(opts.Lock.CoolOffHours)
		}
		if _, err := c.ec2.LockSnapshot(ctx, lin, c.retryers.option("LockSnapshot")); err != nil {
			return nil, c.undoSnapshot(ctx, snap.SnapshotID, fmt.Errorf("lock snapshot: %w", err))
		}
	}
	return snap, nil
}

func (c *Cloud) undoSnapshot(ctx context.Context, id string, cause error) error {
	if err := c.DeleteSnapshot(context.WithoutCancel(ctx), id); err != nil {
		klog.FromContext(ctx).Error(err, "Could not delete the snapshot after a failed follow-up", "snapshotID", id)
	}
	return fmt.Errorf("snapshot %s deleted again: %w", id, cause)
}

func (c *Cloud) enableFSR(ctx context.Context, id string, zones []string) error {
	out, err := c.ec2.EnableFastSnapshotRestores(ctx, &ec2.EnableFastSnapshotRestoresInput{
		AvailabilityZones: zones, SourceSnapshotIds: []string{id},
	}, c.retryers.option("EnableFastSnapshotRestores"))
	if err != nil {
		return fmt.Errorf("enable fast snapshot restore in %v: %w", zones, err)
	}
	for _, u := range out.Unsuccessful {
		for _, e := range u.FastSnapshotRestoreStateErrors {
			if e.Error != nil {
				return fmt.Errorf("enable fast snapshot restore in %s: %s: %s", aws.ToString(e.AvailabilityZone),
					aws.ToString(e.Error.Code), aws.ToString(e.Error.Message))
			}
		}
	}
	return nil
}

// DeleteSnapshot deletes the snapshot. A missing snapshot counts as deleted.
func (c *Cloud) DeleteSnapshot(ctx context.Context, id string) error {
	_, err := c.ec2.DeleteSnapshot(ctx, &ec2.DeleteSnapshotInput{SnapshotId: aws.String(id), DryRun: aws.Bool(false)},
		c.retryers.option("DeleteSnapshot"))
	if err == nil || isNotFound(err) {
		return nil
	}
	if isCode(err, "InvalidSnapshot.InUse") {
		return fmt.Errorf("snapshot %s is in use: %w: %w", id, ErrVolumeInUse, err)
	}
	return fmt.Errorf("delete snapshot %s: %w", id, err)
}

// GetSnapshotByName finds the snapshot the driver created for a CSI snapshot name.
func (c *Cloud) GetSnapshotByName(ctx context.Context, name string) (*Snapshot, error) {
	s, err := c.snapshotsByNm.get(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("snapshot named %q: %w", name, err)
	}
	return snapshotFrom(s), nil
}

// GetSnapshotByID returns the snapshot.
func (c *Cloud) GetSnapshotByID(ctx context.Context, id string) (*Snapshot, error) {
	s, err := c.snapshotsByID.get(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("snapshot %s: %w", id, err)
	}
	return snapshotFrom(s), nil
}

// AvailabilityZones returns the region's zones (cached for an hour).
func (c *Cloud) AvailabilityZones(ctx context.Context) ([]string, error) {
	// One caller fetches while the others wait, so a burst of CreateVolume calls costs one request.
	c.zonesFetch.Lock()
	defer c.zonesFetch.Unlock()
	c.mu.Lock()
	if c.zones != nil && c.now().Before(c.zonesExpiry) {
		z := c.zones
		c.mu.Unlock()
		return z, nil
	}
	c.mu.Unlock()
	out, err := c.ec2.DescribeAvailabilityZones(ctx, &ec2.DescribeAvailabilityZonesInput{})
	if err != nil {
		return nil, fmt.Errorf("describe availability zones: %w", err)
	}
	var zones []string
	for _, z := range out.AvailabilityZones {
		zones = append(zones, aws.ToString(z.ZoneName))
	}
	sort.Strings(zones)
	c.mu.Lock()
	c.zones, c.zonesExpiry = zones, c.now().Add(time.Hour)
	c.mu.Unlock()
	return zones, nil
}
