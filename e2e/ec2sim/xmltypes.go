package ec2sim

import "time"

// The x* types are EC2's response shapes with the element names aws-sdk-go-v2's deserializers expect.

const timeFormat = "2006-01-02T15:04:05.000Z"

func ts(t time.Time) string { return t.UTC().Format(timeFormat) }

type xTag struct {
	Key   string `xml:"key"`
	Value string `xml:"value"`
}

func xTags(tags []tag) []xTag {
	out := make([]xTag, len(tags))
	for i, t := range tags {
		out[i] = xTag(t)
	}
	return out
}

type xAttachment struct {
	VolumeID            string `xml:"volumeId"`
	InstanceID          string `xml:"instanceId"`
	Device              string `xml:"device"`
	Status              string `xml:"status"`
	AttachTime          string `xml:"attachTime"`
	DeleteOnTermination bool   `xml:"deleteOnTermination"`
	EbsCardIndex        *int64 `xml:"ebsCardIndex,omitempty"`
}

type xVolume struct {
	VolumeID           string        `xml:"volumeId"`
	Size               int64         `xml:"size"`
	SnapshotID         string        `xml:"snapshotId"`
	AvailabilityZone   string        `xml:"availabilityZone"`
	AvailabilityZoneID string        `xml:"availabilityZoneId"`
	Status             string        `xml:"status"`
	CreateTime         string        `xml:"createTime"`
	Attachments        []xAttachment `xml:"attachmentSet>item"`
	Tags               []xTag        `xml:"tagSet>item"`
	VolumeType         string        `xml:"volumeType"`
	Iops               *int64        `xml:"iops,omitempty"`
	Throughput         *int64        `xml:"throughput,omitempty"`
	Encrypted          bool          `xml:"encrypted"`
	KmsKeyID           string        `xml:"kmsKeyId,omitempty"`
	MultiAttachEnabled bool          `xml:"multiAttachEnabled"`
	OutpostArn         string        `xml:"outpostArn,omitempty"`
	SourceVolumeID     string        `xml:"sourceVolumeId,omitempty"`
	FastRestored       bool          `xml:"fastRestored"`
}

type xVolumeModification struct {
	VolumeID                   string `xml:"volumeId"`
	ModificationState          string `xml:"modificationState"`
	TargetSize                 int64  `xml:"targetSize"`
	TargetIops                 int64  `xml:"targetIops"`
	TargetVolumeType           string `xml:"targetVolumeType"`
	TargetThroughput           int64  `xml:"targetThroughput"`
	TargetMultiAttachEnabled   bool   `xml:"targetMultiAttachEnabled"`
	OriginalSize               int64  `xml:"originalSize"`
	OriginalIops               int64  `xml:"originalIops"`
	OriginalVolumeType         string `xml:"originalVolumeType"`
	OriginalThroughput         int64  `xml:"originalThroughput"`
	OriginalMultiAttachEnabled bool   `xml:"originalMultiAttachEnabled"`
	Progress                   int64  `xml:"progress"`
	StartTime                  string `xml:"startTime"`
	EndTime                    string `xml:"endTime,omitempty"`
}

type xSnapshot struct {
	SnapshotID  string `xml:"snapshotId"`
	VolumeID    string `xml:"volumeId"`
	Status      string `xml:"status"`
	StartTime   string `xml:"startTime"`
	Progress    string `xml:"progress"`
	OwnerID     string `xml:"ownerId"`
	VolumeSize  int64  `xml:"volumeSize"`
	Description string `xml:"description"`
	Encrypted   bool   `xml:"encrypted"`
	KmsKeyID    string `xml:"kmsKeyId,omitempty"`
	OutpostArn  string `xml:"outpostArn,omitempty"`
	StorageTier string `xml:"storageTier"`
	Tags        []xTag `xml:"tagSet>item"`
}

type returnTrue struct {
	Return bool `xml:"return"`
}
