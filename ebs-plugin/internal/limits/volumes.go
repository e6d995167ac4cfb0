package limits

import "github.com/stowage-csi/stowage/ebs-plugin/internal/devicemanager"

// Node is what the limit depends on that changes per node, from instance metadata.
type Node struct {
	InstanceType string
	// LaunchVolumes counts the EBS volumes in the block device mapping beyond the root (attached at launch,
	// not by CSI). Negative means unknown and counts as none, as upstream.
	LaunchVolumes int
	// ENIs is the number of network interfaces; below 1 means unknown and counts as the one every instance has.
	ENIs int
}

// Settings are the user's flags.
type Settings struct {
	// AttachLimit is --volume-attach-limit: when >= 0 it is reported as is, 0 included (upstream does the
	// same; Kubernetes reads 0 as "no limit").
	AttachLimit int64
	// Reserved is --reserved-volume-attachments: slots held back for volumes CSI does not manage, the root
	// included. Negative means count them: launch volumes + 1 for the root.
	Reserved int
}

// Result is max_volumes_per_node and how it was reached, for the log.
type Result struct {
	MaxVolumes int64
	// FromFlag: --volume-attach-limit was reported and nothing else applies.
	FromFlag bool
	Limit    Limit
	// Listed is false when the type is not in the table and the Nitro default was used.
	Listed bool
	// Reserved and ENIs are the slots subtracted from one card's Limit.Attachments.
	Reserved int
	ENIs     int
}

// MaxVolumes computes max_volumes_per_node as upstream does: one EBS card's limit, minus the reserved
// attachments, minus the network interfaces beyond the primary on types whose slots they share, no more than
// the device names an instance can be given, and never below 1, because Kubernetes reads 0 as unlimited and a
// node that can attach nothing would be flooded. A type with several EBS cards counts one card: attaches go
// without an EbsCardIndex, so EC2 puts them all on the first card, and reporting every card's slots would let
// the scheduler place volumes that can never attach.
func (t *Table) MaxVolumes(n Node, s Settings) Result {
	if s.AttachLimit >= 0 {
		return Result{MaxVolumes: s.AttachLimit, FromFlag: true}
	}
	l, listed := t.Lookup(n.InstanceType)
	r := Result{Limit: l, Listed: listed, Reserved: s.Reserved}
	if r.Reserved < 0 {
		r.Reserved = max(n.LaunchVolumes, 0) + 1
	}
	if l.Kind == Shared && n.ENIs > 1 {
		r.ENIs = n.ENIs - 1
	}
	slots := min(int64(l.Attachments)-int64(r.Reserved)-int64(r.ENIs), int64(devicemanager.NameCount()))
	r.MaxVolumes = max(slots, 1)
	return r
}
