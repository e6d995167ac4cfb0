package params

import (
	"sort"
	"strconv"
	"strings"
	"time"
)

// Snapshot is a validated set of VolumeSnapshotClass parameters.
type Snapshot struct {
	FSRZones                  []string
	OutpostARN                string
	LockMode                  string
	LockDurationDays          int32
	LockExpirationDate        *time.Time
	LockCoolOffHours          int32
	TagSpecs                  []string
	VolumeSnapshotName        string
	VolumeSnapshotNamespace   string
	VolumeSnapshotContentName string
}

// ParseSnapshot validates CreateSnapshot parameters.
func ParseSnapshot(raw map[string]string) (*Snapshot, error) {
	if err := duplicateKey(raw, strings.ToLower); err != nil {
		return nil, err
	}
	s := &Snapshot{}
	var tagKeys []string
	for rawKey, value := range raw {
		if strings.HasPrefix(rawKey, TagSpecificationPrefix) {
			tagKeys = append(tagKeys, rawKey)
			continue
		}
		var err error
		switch strings.ToLower(rawKey) {
		case KeyFSRZones:
			for _, z := range strings.Split(value, ",") {
				if z = strings.TrimSpace(z); z != "" {
					s.FSRZones = append(s.FSRZones, z)
				}
			}
			if len(s.FSRZones) == 0 {
				return nil, invalid(rawKey, value, "no availability zone given")
			}
		case KeyOutpostARN:
			if !strings.HasPrefix(value, "arn:") || strings.Count(value, ":") < 5 {
				return nil, invalid(rawKey, value, "must be an ARN")
			}
			s.OutpostARN = value
		case KeyLockMode:
			switch strings.ToLower(value) {
			case "governance", "compliance":
				s.LockMode = strings.ToLower(value)
			default:
				return nil, invalid(rawKey, value, "must be governance or compliance")
			}
		case KeyLockDuration:
			s.LockDurationDays, err = positiveInt32(rawKey, value)
		case KeyLockExpirationDate:
			t, perr := time.Parse(time.RFC3339, value)
			if perr != nil {
				return nil, invalid(rawKey, value, "must be an RFC3339 time")
			}
			s.LockExpirationDate = &t
		case KeyLockCoolOffPeriod:
			s.LockCoolOffHours, err = positiveInt32(rawKey, value)
		case KeyVolumeSnapshotName:
			s.VolumeSnapshotName = value
		case KeyVolumeSnapshotNamespace:
			s.VolumeSnapshotNamespace = value
		case KeyVolumeSnapshotContent:
			s.VolumeSnapshotContentName = value
		default:
			return nil, invalid(rawKey, value, "unknown parameter")
		}
		if err != nil {
			return nil, err
		}
	}
	lockSet := s.LockDurationDays > 0 || s.LockExpirationDate != nil || s.LockCoolOffHours > 0
	if lockSet && s.LockMode == "" {
		return nil, invalid(KeyLockMode, "", "lock parameters need lockMode")
	}
	if s.LockMode != "" && (s.LockDurationDays > 0) == (s.LockExpirationDate != nil) {
		return nil, invalid(KeyLockDuration, strconv.Itoa(int(s.LockDurationDays)), "set exactly one of lockDuration and lockExpirationDate")
	}
	if s.LockCoolOffHours > 0 && s.LockMode != "compliance" {
		return nil, invalid(KeyLockCoolOffPeriod, strconv.Itoa(int(s.LockCoolOffHours)), "only valid with lockMode compliance")
	}
	sort.Strings(tagKeys)
	for _, k := range tagKeys {
		s.TagSpecs = append(s.TagSpecs, raw[k])
	}
	return s, nil
}

// positiveInt32 parses a snapshot lock's days or hours, which EC2 needs at 1 or more.
func positiveInt32(key, value string) (int32, error) {
	n, err := strconv.ParseInt(value, 10, 32)
	if err != nil || n <= 0 {
		return 0, invalid(key, value, "must be a positive integer")
	}
	return int32(n), nil
}
