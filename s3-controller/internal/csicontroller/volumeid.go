package csicontroller

import (
	"fmt"
	"strings"
	"unicode"
)

// Volume IDs of dynamically provisioned volumes: "dp1:<keep|delete>:<bucket>:<prefix>". The ID is all
// DeleteVolume gets (the csi-provisioner passes no StorageClass parameters to it), so it carries the
// bucket, the volume's key prefix and the class's choice about the objects. Buckets never hold ':'
// (validateBucket refuses it), so the first three fields split cleanly and the prefix may hold anything.
const (
	idVersion    = "dp1"
	policyKeep   = "keep"
	policyDelete = "delete"
)

// volumeID is a parsed dynamic volume ID.
type volumeID struct {
	Bucket string
	// Prefix is the volume's key prefix, ending with '/'.
	Prefix string
	// DeleteObjects says DeleteVolume removes the objects under Prefix.
	DeleteObjects bool
}

// String encodes the ID.
func (v volumeID) String() string {
	policy := policyKeep
	if v.DeleteObjects {
		policy = policyDelete
	}
	return strings.Join([]string{idVersion, policy, v.Bucket, v.Prefix}, ":")
}

// errNotDynamic marks IDs this controller never made (static volumes' handles, other formats).
var errNotDynamic = fmt.Errorf("not a dynamically provisioned volume ID")

// parseVolumeID reads an ID made by String. IDs that do not start with the version are errNotDynamic;
// IDs that do but are malformed are errors that say why.
func parseVolumeID(id string) (volumeID, error) {
	parts := strings.SplitN(id, ":", 4)
	if len(parts) != 4 || parts[0] != idVersion {
		return volumeID{}, errNotDynamic
	}
	v := volumeID{Bucket: parts[2], Prefix: parts[3]}
	switch parts[1] {
	case policyKeep:
	case policyDelete:
		v.DeleteObjects = true
	default:
		return volumeID{}, fmt.Errorf("volume ID %q: object policy %q is neither %s nor %s", id, parts[1], policyKeep, policyDelete)
	}
	if err := validateBucket(v.Bucket); err != nil {
		return volumeID{}, fmt.Errorf("volume ID %q: %w", id, err)
	}
	// An empty or unterminated prefix would make DeleteVolume reach beyond one volume's keys.
	if v.Prefix == "" || !strings.HasSuffix(v.Prefix, "/") || strings.HasPrefix(v.Prefix, "/") {
		return volumeID{}, fmt.Errorf("volume ID %q: prefix %q must be non-empty, end with '/' and not start with '/'", id, v.Prefix)
	}
	// Nor does CreateVolume make a prefix with an empty, "." or ".." segment or a control character
	// (expandPrefix).
	for _, seg := range strings.Split(strings.TrimSuffix(v.Prefix, "/"), "/") {
		if seg == "" || seg == "." || seg == ".." || strings.IndexFunc(seg, unicode.IsControl) >= 0 {
			return volumeID{}, fmt.Errorf("volume ID %q: prefix %q has an empty, '.' or '..' segment or a control character", id, v.Prefix)
		}
	}
	return v, nil
}
