package cloud

import (
	"context"
	"fmt"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// describeAll runs describe for ids; when EC2 fails the call with NotFound naming some IDs, those are dropped
// and the rest described again, so one deleted volume does not fail a whole batch.
func describeAll[V any](ctx context.Context, ids []string, describe func(context.Context, []string) (map[string]V, error)) (map[string]V, error) {
	remaining := slices.Clone(ids)
	for len(remaining) > 0 {
		out, err := describe(ctx, remaining)
		if err == nil {
			return out, nil
		}
		if !isNotFound(err) {
			return nil, err
		}
		missing := namedIDs(err)
		before := len(remaining)
		remaining = slices.DeleteFunc(remaining, func(id string) bool { return slices.Contains(missing, id) })
		if len(remaining) == before {
			if before == 1 {
				return map[string]V{}, nil
			}
			return nil, err
		}
	}
	return map[string]V{}, nil
}

func (c *Cloud) describeVolumesByID(ctx context.Context, ids []string) (map[string]types.Volume, error) {
	return describeAll(ctx, ids, func(ctx context.Context, ids []string) (map[string]types.Volume, error) {
		out := map[string]types.Volume{}
		p := ec2.NewDescribeVolumesPaginator(c.ec2, &ec2.DescribeVolumesInput{VolumeIds: ids})
		for p.HasMorePages() {
			page, err := p.NextPage(ctx)
			if err != nil {
				return nil, err
			}
			for _, v := range page.Volumes {
				out[aws.ToString(v.VolumeId)] = v
			}
		}
		return out, nil
	})
}

func (c *Cloud) describeInstancesByID(ctx context.Context, ids []string) (map[string]types.Instance, error) {
	return describeAll(ctx, ids, func(ctx context.Context, ids []string) (map[string]types.Instance, error) {
		out := map[string]types.Instance{}
		p := ec2.NewDescribeInstancesPaginator(c.ec2, &ec2.DescribeInstancesInput{InstanceIds: ids})
		for p.HasMorePages() {
			page, err := p.NextPage(ctx)
			if err != nil {
				return nil, err
			}
			for _, r := range page.Reservations {
				for _, i := range r.Instances {
					out[aws.ToString(i.InstanceId)] = i
				}
			}
		}
		return out, nil
	})
}

func (c *Cloud) describeSnapshotsByID(ctx context.Context, ids []string) (map[string]types.Snapshot, error) {
	return describeAll(ctx, ids, func(ctx context.Context, ids []string) (map[string]types.Snapshot, error) {
		snaps, _, err := c.describeSnapshots(ctx, &ec2.DescribeSnapshotsInput{SnapshotIds: ids}, true)
		if err != nil {
			return nil, err
		}
		out := map[string]types.Snapshot{}
		for _, s := range snaps {
			out[aws.ToString(s.SnapshotId)] = s
		}
		return out, nil
	})
}

func (c *Cloud) describeSnapshotsByName(ctx context.Context, names []string) (map[string]types.Snapshot, error) {
	snaps, _, err := c.describeSnapshots(ctx, &ec2.DescribeSnapshotsInput{
		Filters: []types.Filter{{Name: aws.String("tag:" + tagSnapshotName), Values: names}},
	}, true)
	if err != nil {
		return nil, err
	}
	out := map[string]types.Snapshot{}
	for _, s := range snaps {
		if name, ok := tagValue(s.Tags, tagSnapshotName); ok {
			out[name] = s
		}
	}
	return out, nil
}

func (c *Cloud) describeSnapshots(ctx context.Context, in *ec2.DescribeSnapshotsInput, all bool) ([]types.Snapshot, string, error) {
	var snaps []types.Snapshot
	for {
		page, err := c.ec2.DescribeSnapshots(ctx, in)
		if err != nil {
			return nil, "", err
		}
		snaps = append(snaps, page.Snapshots...)
		next := aws.ToString(page.NextToken)
		if next == "" || !all {
			return snaps, next, nil
		}
		in.NextToken = aws.String(next)
	}
}

func (c *Cloud) describeModificationsByID(ctx context.Context, ids []string) (map[string]types.VolumeModification, error) {
	out := map[string]types.VolumeModification{}
	in := &ec2.DescribeVolumesModificationsInput{VolumeIds: ids}
	for {
		page, err := c.ec2.DescribeVolumesModifications(ctx, in)
		if err != nil {
			if isCode(err, "InvalidVolumeModification.NotFound") {
				return out, nil // never modified
			}
			return nil, err
		}
		for _, m := range page.VolumesModifications {
			// The last element is the latest modification.
			out[aws.ToString(m.VolumeId)] = m
		}
		if aws.ToString(page.NextToken) == "" {
			return out, nil
		}
		in.NextToken = page.NextToken
	}
}

func tagValue(tags []types.Tag, key string) (string, bool) {
	for _, t := range tags {
		if aws.ToString(t.Key) == key {
			return aws.ToString(t.Value), true
		}
	}
	return "", false
}

// GetDisk returns the volume with id.
func (c *Cloud) GetDisk(ctx context.Context, volumeID string) (*Disk, error) {
	v, err := c.volumes.get(ctx, volumeID)
	if err != nil {
		return nil, fmt.Errorf("describe volume %s: %w", volumeID, err)
	}
	return diskFrom(v), nil
}
