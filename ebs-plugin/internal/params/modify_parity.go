package params

import (
	"fmt"
	"strconv"
)

// Provisioned-IOPS bounds EC2 enforces for io1 and io2: a minimum, an absolute maximum, and a maximum per GiB
// of size. gp3 and the other types are left to EC2 and to the cloud package's clamping.
var provisionedIOPSBounds = map[string]struct{ min, max, perGiB int64 }{
	VolumeTypeIO1: {min: 100, max: 64000, perGiB: 50},
	VolumeTypeIO2: {min: 100, max: 256000, perGiB: 1000},
}

// ModifyCurrent is what a volume has now: ControllerModifyVolume merges a VolumeAttributesClass with it
// before checking IOPS.
type ModifyCurrent struct {
	VolumeType string
	SizeGiB    int32
	IOPS       int32
}

// CheckMergedIOPS checks the IOPS an io1 or io2 volume would have once the modify request is merged with
// the volume's current type, size and IOPS: a VolumeAttributesClass that changes only `type` keeps the
// current IOPS, one that sets `iops` or `iopsPerGB` keeps the current type. The error names the field the
// request set that makes the result invalid (iops, iopspergb, or type when only the type changed).
func (m *Modify) CheckMergedIOPS(cur ModifyCurrent) error {
	vt := m.VolumeType
	if vt == "" {
		vt = cur.VolumeType
	}
	b, ok := provisionedIOPSBounds[vt]
	if !ok || cur.SizeGiB <= 0 {
		return nil
	}
	size := int64(cur.SizeGiB)
	field, value := "type", m.VolumeType
	iops := int64(cur.IOPS)
	switch {
	case m.IOPS > 0:
		field, value, iops = KeyIOPS, strconv.Itoa(int(m.IOPS)), int64(m.IOPS)
	case m.IOPSPerGB > 0:
		// The cloud package clamps iopsPerGB × size to the type's minimum and maximum; only the ratio itself
		// can be out of range for the type.
		if int64(m.IOPSPerGB) > b.perGiB {
			return invalid(KeyIOPSPerGB, strconv.Itoa(int(m.IOPSPerGB)), "%s allows at most %d IOPS per GiB", vt, b.perGiB)
		}
		return nil
	case m.VolumeType == "":
		return nil // neither type nor IOPS change: nothing to re-check
	}
	what := fmt.Sprintf("the requested %d IOPS", iops)
	if field == "type" {
		value = m.VolumeType
		what = fmt.Sprintf("the volume's current %d IOPS (set iops in the same class)", iops)
	}
	switch {
	case iops < b.min:
		return invalid(field, value, "%s needs at least %d IOPS, got %s", vt, b.min, what)
	case iops > b.max:
		return invalid(field, value, "%s allows at most %d IOPS, got %s", vt, b.max, what)
	case iops > b.perGiB*size:
		return invalid(field, value, "%s allows at most %d IOPS per GiB (%d for this %d GiB volume), got %s",
			vt, b.perGiB, b.perGiB*size, size, what)
	}
	return nil
}
