package cloud

import (
	"errors"
	"sort"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

const (
	tagVolumeName   = "CSIVolumeName"
	tagSnapshotName = "CSIVolumeSnapshotName"
	gib             = int64(1) << 30
)

// Disk is an EBS volume as the driver sees it.
type Disk struct {
	VolumeID         string
	CapacityGiB      int32
	AvailabilityZone string
	OutpostARN       string
	SnapshotID       string
	VolumeType       string
	IOPS             int32
	Throughput       int32
	Encrypted        bool
	KMSKeyID         string
	MultiAttach      bool
	State            string
	Tags             map[string]string
	Attachments      []Attachment
}

// Attachment is one attachment of a volume.
type Attachment struct {
	InstanceID string
	Device     string
	State      string
	AttachTime time.Time
}

func diskFrom(v types.Volume) *Disk {
	d := &Disk{
		VolumeID:         aws.ToString(v.VolumeId),
		CapacityGiB:      aws.ToInt32(v.Size),
		AvailabilityZone: aws.ToString(v.AvailabilityZone),
		OutpostARN:       aws.ToString(v.OutpostArn),
		SnapshotID:       aws.ToString(v.SnapshotId),
		VolumeType:       string(v.VolumeType),
		IOPS:             aws.ToInt32(v.Iops),
		Throughput:       aws.ToInt32(v.Throughput),
		Encrypted:        aws.ToBool(v.Encrypted),
		KMSKeyID:         aws.ToString(v.KmsKeyId),
		MultiAttach:      aws.ToBool(v.MultiAttachEnabled),
		State:            string(v.State),
		Tags:             map[string]string{},
	}
	for _, t := range v.Tags {
		d.Tags[aws.ToString(t.Key)] = aws.ToString(t.Value)
	}
	for _, a := range v.Attachments {
		d.Attachments = append(d.Attachments, Attachment{
			InstanceID: aws.ToString(a.InstanceId),
			Device:     aws.ToString(a.Device),
			State:      string(a.State),
			AttachTime: aws.ToTime(a.AttachTime),
		})
	}
	return d
}

// Snapshot is an EBS snapshot as the driver sees it.
type Snapshot struct {
	SnapshotID     string
	SourceVolumeID string
	SizeGiB        int32
	CreationTime   time.Time
	ReadyToUse     bool
	Tags           map[string]string
}

func snapshotFrom(s types.Snapshot) *Snapshot {
	out := &Snapshot{
		SnapshotID:     aws.ToString(s.SnapshotId),
		SourceVolumeID: aws.ToString(s.VolumeId),
		SizeGiB:        aws.ToInt32(s.VolumeSize),
		CreationTime:   aws.ToTime(s.StartTime),
		ReadyToUse:     s.State == types.SnapshotStateCompleted,
		Tags:           map[string]string{},
	}
	for _, t := range s.Tags {
		out.Tags[aws.ToString(t.Key)] = aws.ToString(t.Value)
	}
	return out
}

func isNotFoundErr(err error) bool { return errors.Is(err, ErrNotFound) }

// toTags sorts by key: a repeated CreateVolume must send byte-identical parameters, or EC2 answers
// IdempotentParameterMismatch for its own ClientToken.
func toTags(m map[string]string) []types.Tag {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	tags := make([]types.Tag, 0, len(m))
	for _, k := range keys {
		tags = append(tags, types.Tag{Key: aws.String(k), Value: aws.String(m[k])})
	}
	return tags
}

// RoundUpGiB rounds bytes up to whole GiB.
func RoundUpGiB(bytes int64) int64 {
	return (bytes + gib - 1) / gib
}
