package params

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// FormatOptions are the mkfs tunables a StorageClass may set. They travel to the node in the volume context.
type FormatOptions struct {
	BlockSize             string
	InodeSize             string
	BytesPerInode         string
	NumberOfInodes        string
	Ext4BigAlloc          bool
	Ext4ClusterSize       string
	Ext4EncryptionSupport bool
}

// Volume is a validated set of StorageClass parameters.
type Volume struct {
	FsType                      string
	VolumeType                  string
	IOPS                        int32
	IOPSPerGB                   int32
	AllowIOPSPerGBIncrease      bool
	AllowIOPSIncreaseOnModify   bool
	Throughput                  int32
	Encrypted                   bool
	KMSKeyID                    string
	BlockExpress                bool
	VolumeInitializationRate    int32
	BlockAttachUntilInitialized bool
	Format                      FormatOptions
	// TagSpecs are the raw "key=template" values of tagSpecification_N, ordered by key.
	TagSpecs     []string
	PVCName      string
	PVCNamespace string
	PVName       string
	// Warnings are non-fatal findings (deprecated keys) for the caller to log.
	Warnings []string
}

// FileSystems lists the filesystems the node can format, and which format options each accepts.
var FileSystems = map[string]map[string]bool{
	"ext2": {KeyBlockSize: true, KeyInodeSize: true, KeyBytesPerInode: true, KeyNumberOfInodes: true},
	"ext3": {KeyBlockSize: true, KeyInodeSize: true, KeyBytesPerInode: true, KeyNumberOfInodes: true},
	"ext4": {KeyBlockSize: true, KeyInodeSize: true, KeyBytesPerInode: true, KeyNumberOfInodes: true,
		KeyExt4BigAlloc: true, KeyExt4ClusterSize: true, KeyExt4EncryptionSupport: true},
	"xfs": {KeyBlockSize: true, KeyInodeSize: true},
}

var alnum = regexp.MustCompile(`^[a-zA-Z0-9]+$`)

// ParseVolume validates CreateVolume parameters. block is true for raw block volumes, which refuse format
// options. Format options are checked against the StorageClass's fsType (default ext4). Nothing is created by
// the caller when this returns an error.
func ParseVolume(raw map[string]string, block bool) (*Volume, error) {
	return ParseVolumeFor(raw, block, nil)
}

// ParseVolumeFor is ParseVolume for a CreateVolume request whose mount capabilities name fsTypes (empty
// names left out). As upstream, format options are checked against the fsType of every capability, so an
// option the filesystem the node will make cannot take (bytesPerInode on xfs, ext4BigAlloc on ext3) is
// refused before anything is created, the error naming the option and the fsType; the first fsType becomes
// Volume.FsType. With no fsTypes the StorageClass's fsType (default ext4) is used, as in ParseVolume.
func ParseVolumeFor(raw map[string]string, block bool, fsTypes []string) (*Volume, error) {
	if err := duplicateKey(raw, strings.ToLower); err != nil {
		return nil, err
	}
	v := &Volume{VolumeType: DefaultVolumeType}
	var tagKeys []string
	formatKeys := map[string]string{}
	for rawKey, value := range raw {
		if strings.HasPrefix(rawKey, TagSpecificationPrefix) {
			tagKeys = append(tagKeys, rawKey)
			continue
		}
		if err := v.setParam(rawKey, value, formatKeys); err != nil {
			return nil, err
		}
	}
	if v.FsType == "" {
		v.FsType = DefaultFsType
	}
	if err := v.check(block); err != nil {
		return nil, err
	}
	if len(fsTypes) > 0 {
		v.FsType = fsTypes[0]
	} else {
		fsTypes = []string{v.FsType}
	}
	if err := v.Format.set(formatKeys, fsTypes, block); err != nil {
		return nil, err
	}
	sort.Strings(tagKeys)
	for _, k := range tagKeys {
		v.TagSpecs = append(v.TagSpecs, raw[k])
	}
	return v, nil
}

// setParam sets what one StorageClass parameter says (its key matched lowercased, as upstream); format options
// are collected in formatKeys, to be checked against the filesystem once every key is read.
func (v *Volume) setParam(rawKey, value string, formatKeys map[string]string) error {
	key := strings.ToLower(rawKey)
	var err error
	switch key {
	case KeyFsType:
		v.FsType = value
	case KeyFsTypeDeprecated:
		v.Warnings = append(v.Warnings, `parameter "fstype" is deprecated and ignored; use "csi.storage.k8s.io/fstype"`)
	case KeyVolumeType:
		v.VolumeType = strings.ToLower(value)
		if !volumeTypes[v.VolumeType] {
			return invalid(rawKey, value, "unknown volume type; want one of gp2, gp3, io1, io2, sc1, st1, standard")
		}
	case KeyIOPSPerGB:
		v.IOPSPerGB, err = count(rawKey, value)
	case KeyAllowAutoIOPSPerGBIncrease:
		v.AllowIOPSPerGBIncrease = flag(rawKey, value, &v.Warnings)
	case KeyAllowAutoIOPSIncreaseOnModify:
		v.AllowIOPSIncreaseOnModify = flag(rawKey, value, &v.Warnings)
	case KeyIOPS:
		v.IOPS, err = count(rawKey, value)
	case KeyThroughput:
		v.Throughput, err = count(rawKey, value)
	case KeyEncrypted:
		v.Encrypted = flag(rawKey, value, &v.Warnings)
	case KeyKMSKeyID:
		v.KMSKeyID = value
	case KeyBlockExpress:
		v.BlockExpress = flag(rawKey, value, &v.Warnings)
	case KeyVolumeInitializationRate:
		v.VolumeInitializationRate, err = count(rawKey, value)
	case KeyBlockAttachUntilInitialized:
		v.BlockAttachUntilInitialized = flag(rawKey, value, &v.Warnings)
	case KeyBlockSize, KeyInodeSize, KeyBytesPerInode, KeyNumberOfInodes, KeyExt4ClusterSize:
		if !alnum.MatchString(value) {
			return invalid(rawKey, value, "must be alphanumeric")
		}
		formatKeys[key] = value
	case KeyExt4BigAlloc, KeyExt4EncryptionSupport:
		if flag(rawKey, value, &v.Warnings) {
			formatKeys[key] = "true"
		}
	case KeyPVCName:
		v.PVCName = value
	case KeyPVCNamespace:
		v.PVCNamespace = value
	case KeyPVName:
		v.PVName = value
	default:
		return invalid(rawKey, value, "unknown parameter")
	}
	return err
}

// check refuses the combinations EC2 or the node cannot serve, naming the parameter.
func (v *Volume) check(block bool) error {
	if _, ok := FileSystems[v.FsType]; !ok && !block {
		return invalid(KeyFsType, v.FsType, "unsupported filesystem; want one of ext2, ext3, ext4, xfs")
	}
	if v.IOPS > 0 && v.IOPSPerGB > 0 {
		return invalid(KeyIOPS, strconv.Itoa(int(v.IOPS)), "iops and iopsPerGB are mutually exclusive")
	}
	if v.KMSKeyID != "" {
		v.Encrypted = true // EC2 refuses a KMS key on an unencrypted volume; upstream forces it.
	}
	if v.Throughput > 0 && v.VolumeType != VolumeTypeGP3 {
		return invalid(KeyThroughput, strconv.Itoa(int(v.Throughput)), "throughput is only valid for gp3 volumes, type is %q", v.VolumeType)
	}
	if (v.VolumeType == VolumeTypeIO1 || v.VolumeType == VolumeTypeIO2) && v.IOPS == 0 && v.IOPSPerGB == 0 {
		return invalid(KeyVolumeType, v.VolumeType, "io1 and io2 volumes need iops or iopsPerGB")
	}
	return nil
}

// formatParams lists the format options in a fixed order (so errors are deterministic) with the names users
// write them by.
var formatParams = []struct{ key, name string }{
	{KeyBlockSize, "blockSize"},
	{KeyInodeSize, "inodeSize"},
	{KeyBytesPerInode, "bytesPerInode"},
	{KeyNumberOfInodes, "numberOfInodes"},
	{KeyExt4BigAlloc, "ext4BigAlloc"},
	{KeyExt4ClusterSize, "ext4ClusterSize"},
	{KeyExt4EncryptionSupport, "ext4EncryptionSupport"},
}

// set validates keys (format options by lowercased key) against every one of fsTypes and stores them.
func (f *FormatOptions) set(keys map[string]string, fsTypes []string, block bool) error {
	if len(keys) == 0 {
		return nil
	}
	for _, p := range formatParams {
		val, ok := keys[p.key]
		if !ok {
			continue
		}
		if block {
			return invalid(p.name, val, "format options are not valid for block volumes")
		}
		for _, fsType := range fsTypes {
			if !FileSystems[fsType][p.key] {
				return invalid(p.name, val, "not supported for filesystem %q", fsType)
			}
		}
	}
	f.BlockSize = keys[KeyBlockSize]
	f.InodeSize = keys[KeyInodeSize]
	f.BytesPerInode = keys[KeyBytesPerInode]
	f.NumberOfInodes = keys[KeyNumberOfInodes]
	f.Ext4BigAlloc = keys[KeyExt4BigAlloc] == "true"
	f.Ext4ClusterSize = keys[KeyExt4ClusterSize]
	f.Ext4EncryptionSupport = keys[KeyExt4EncryptionSupport] == "true"
	if f.Ext4ClusterSize != "" && !f.Ext4BigAlloc {
		return invalid("ext4ClusterSize", f.Ext4ClusterSize, "needs ext4BigAlloc=true")
	}
	return nil
}

// ContextBlockAttachUntilInitialized is the volume context key, upstream's lowercased parameter key, that tells
// ControllerPublishVolume to wait for a restored volume's initialization to complete before attaching it. It
// is set, to "true", only when the StorageClass enables blockAttachUntilInitialized.
const ContextBlockAttachUntilInitialized = KeyBlockAttachUntilInitialized

// Context returns the volume context of a volume created with these parameters: the format options for the
// node, and blockAttachUntilInitialized for ControllerPublishVolume. It is nil when there is nothing to pass.
func (v *Volume) Context() map[string]string {
	ctx := v.Format.Context()
	if v.BlockAttachUntilInitialized {
		ctx[ContextBlockAttachUntilInitialized] = "true"
	}
	if len(ctx) == 0 {
		return nil
	}
	return ctx
}

// Context returns the volume context entries the node needs to format the volume.
func (f FormatOptions) Context() map[string]string {
	ctx := map[string]string{}
	put := func(k, v string) {
		if v != "" {
			ctx[k] = v
		}
	}
	put(ContextBlockSize, f.BlockSize)
	put(ContextInodeSize, f.InodeSize)
	put(ContextBytesPerInode, f.BytesPerInode)
	put(ContextNumberOfInodes, f.NumberOfInodes)
	put(ContextExt4ClusterSize, f.Ext4ClusterSize)
	if f.Ext4BigAlloc {
		ctx[ContextExt4BigAlloc] = "true"
	}
	if f.Ext4EncryptionSupport {
		ctx[ContextExt4EncryptionSupport] = "true"
	}
	return ctx
}

// FormatFromContext reads format options back from a volume context on the node. Values are re-validated
// because the context can be edited by anyone who can edit a PV.
func FormatFromContext(vc map[string]string, fsType string) (FormatOptions, error) {
	keys := map[string]string{}
	for _, k := range []string{ContextBlockSize, ContextInodeSize, ContextBytesPerInode, ContextNumberOfInodes, ContextExt4ClusterSize} {
		if v, ok := vc[k]; ok {
			if !alnum.MatchString(v) {
				return FormatOptions{}, invalid(k, v, "must be alphanumeric")
			}
			keys[k] = v
		}
	}
	for _, k := range []string{ContextExt4BigAlloc, ContextExt4EncryptionSupport} {
		if v, ok := vc[k]; ok {
			b, err := parseBool(k, v)
			if err != nil {
				return FormatOptions{}, err
			}
			if b {
				keys[k] = "true"
			}
		}
	}
	var f FormatOptions
	if _, ok := FileSystems[fsType]; !ok {
		return f, invalid(KeyFsType, fsType, "unsupported filesystem; want one of ext2, ext3, ext4, xfs")
	}
	return f, f.set(keys, []string{fsType}, false)
}

// count parses a StorageClass or VolumeAttributesClass number as upstream does: a whole number, where 0 means
// unset (upstream's chart and users write "0" to leave iops or throughput to EC2's default). Upstream passes a
// negative number on to EC2 to refuse; it is refused here, naming the key.
func count(key, value string) (int32, error) {
	n, err := strconv.ParseInt(value, 10, 32)
	if err != nil || n < 0 {
		return 0, invalid(key, value, "must be a whole number, 0 for unset")
	}
	return int32(n), nil
}

// flag parses a StorageClass or VolumeAttributesClass switch as upstream does: only "true" turns it on, and
// every other value, "" included, leaves it off, so a StorageClass that upstream reads as unencrypted is not
// encrypted here. Any value but "true", "false" and "" gets a warning naming the key: "True" or "1" is most
// likely meant as on.
func flag(key, value string, warnings *[]string) bool {
	switch value {
	case "true":
		return true
	case "false", "":
	default:
		*warnings = append(*warnings, fmt.Sprintf(`parameter %q is %q, which is read as false: only "true" turns it on, as upstream`, key, value))
	}
	return false
}

// parseBool parses a value Stowage wrote itself (the volume context), where anything but true or false is an
// error.
func parseBool(key, value string) (bool, error) {
	b, err := strconv.ParseBool(value)
	if err != nil {
		return false, invalid(key, value, "must be true or false")
	}
	return b, nil
}
