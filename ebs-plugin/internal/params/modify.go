package params

import (
	"sort"
	"strconv"
	"strings"
)

// Modify is a validated set of VolumeAttributesClass (mutable) parameters.
type Modify struct {
	VolumeType                string
	IOPS                      int32
	IOPSPerGB                 int32
	Throughput                int32
	AllowIOPSIncreaseOnModify bool
	// AllowIOPSIncreaseOnModifySet tells an explicit allowAutoIOPSIncreaseOnModify=false from an absent key.
	AllowIOPSIncreaseOnModifySet bool
	TagSpecs                     []string
	TagDeletions                 []string
	PVCName                      string
	PVCNamespace                 string
	PVName                       string
	Warnings                     []string
}

// ParseModify validates ControllerModifyVolume parameters. Keys match exactly, as upstream does: a
// VolumeAttributesClass is not lowercased. createTime restricts the keys to what CreateVolume's
// mutable_parameters accept (iops, throughput, type/volumeType, tagSpecification_N).
func ParseModify(raw map[string]string, createTime bool) (*Modify, error) {
	volumeTypeAlias := func(k string) string {
		if k == "volumeType" {
			return "type"
		}
		return k
	}
	if err := duplicateKey(raw, volumeTypeAlias); err != nil {
		return nil, err
	}
	m := &Modify{}
	var tagKeys, delKeys []string
	for key, value := range raw {
		switch {
		case strings.HasPrefix(key, TagSpecificationPrefix):
			tagKeys = append(tagKeys, key)
			continue
		case strings.HasPrefix(key, TagDeletionPrefix) && !createTime:
			if IsReservedTagKey(value) {
				return nil, invalid(key, value, "tag key is reserved for the driver and cannot be deleted")
			}
			if value == "" {
				return nil, invalid(key, value, "tag key to delete is empty")
			}
			delKeys = append(delKeys, key)
			continue
		}
		var err error
		switch key {
		case "type", "volumeType":
			if key == "volumeType" {
				m.Warnings = append(m.Warnings, `parameter "volumeType" is deprecated; use "type"`)
			}
			m.VolumeType = strings.ToLower(value)
			if !volumeTypes[m.VolumeType] {
				return nil, invalid(key, value, "unknown volume type; want one of gp2, gp3, io1, io2, sc1, st1, standard")
			}
		case "iops":
			m.IOPS, err = count(key, value)
		case "throughput":
			m.Throughput, err = count(key, value)
		case KeyIOPSPerGB:
			if createTime {
				return nil, invalid(key, value, "not a mutable parameter")
			}
			m.IOPSPerGB, err = count(key, value)
		case KeyAllowAutoIOPSIncreaseOnModify:
			if createTime {
				return nil, invalid(key, value, "not a mutable parameter")
			}
			m.AllowIOPSIncreaseOnModify = flag(key, value, &m.Warnings)
			m.AllowIOPSIncreaseOnModifySet = true
		case KeyPVCName:
			m.PVCName = value
		case KeyPVCNamespace:
			m.PVCNamespace = value
		case KeyPVName:
			m.PVName = value
		default:
			return nil, invalid(key, value, "unknown mutable parameter")
		}
		if err != nil {
			return nil, err
		}
	}
	if m.IOPS > 0 && m.IOPSPerGB > 0 {
		return nil, invalid("iops", strconv.Itoa(int(m.IOPS)), "iops and iopspergb are mutually exclusive")
	}
	sort.Strings(tagKeys)
	for _, k := range tagKeys {
		m.TagSpecs = append(m.TagSpecs, raw[k])
	}
	sort.Strings(delKeys)
	for _, k := range delKeys {
		m.TagDeletions = append(m.TagDeletions, raw[k])
	}
	return m, nil
}

// Empty reports whether the request changes nothing about the volume itself (tags aside).
func (m *Modify) Empty() bool {
	return m.VolumeType == "" && m.IOPS == 0 && m.IOPSPerGB == 0 && m.Throughput == 0
}
