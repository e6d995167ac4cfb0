package csicontroller

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"unicode"
)

// StorageClass parameters of a dynamic S3 class.
const (
	ParamBucketName    = "bucketName"
	ParamPrefix        = "prefix"
	ParamDeleteObjects = "deleteObjectsOnDelete"

	// AttrPrefix is the volume attribute that tells s3-node which key prefix to mount.
	AttrPrefix = "prefix"

	// Keys the csi-provisioner adds with --extra-create-metadata, which the prefix template may use.
	paramPVCName      = "csi.storage.k8s.io/pvc/name"
	paramPVCNamespace = "csi.storage.k8s.io/pvc/namespace"
	reservedPrefix    = "csi.storage.k8s.io/"
	envAttrPrefix     = "mountpointEnv."
)

// passThrough are the volume attributes of upstream (awslabs/mountpoint-s3-csi-driver) a class may set for
// all its volumes; they are copied to the volume context as they are, and s3-node and the controller validate
// them as for static PVs.
var passThrough = map[string]bool{
	"authenticationSource": true, "stsRegion": true, "cache": true,
	"cacheEmptyDirSizeLimit": true, "cacheEmptyDirMedium": true,
	"cacheEphemeralStorageClassName": true, "cacheEphemeralStorageResourceRequest": true,
	"mountpointPodServiceAccountName":         true,
	"mountpointContainerResourcesRequestsCpu": true, "mountpointContainerResourcesRequestsMemory": true,
	"mountpointContainerResourcesLimitsCpu": true, "mountpointContainerResourcesLimitsMemory": true,
}

// templateVars are the variables a prefix template may hold, each with the parameter that fills it
// ("" for the PV name, which is CreateVolume's name).
var templateVars = map[string]string{
	"${pvc.namespace}": paramPVCNamespace,
	"${pvc.name}":      paramPVCName,
	"${pv.name}":       "",
}

// classParams are a class's validated parameters.
type classParams struct {
	bucket        string
	prefixTmpl    string
	deleteObjects bool
	attributes    map[string]string
}

// parseParams validates CreateVolume's parameters; errors name the parameter.
func parseParams(params map[string]string) (classParams, error) {
	p := classParams{bucket: params[ParamBucketName], prefixTmpl: params[ParamPrefix], attributes: map[string]string{}}
	if p.bucket == "" {
		return p, fmt.Errorf("parameter %s is required", ParamBucketName)
	}
	if err := validateBucket(p.bucket); err != nil {
		return p, err
	}
	switch v := params[ParamDeleteObjects]; v {
	case "", "false":
	case "true":
		p.deleteObjects = true
	default:
		return p, fmt.Errorf("parameter %s=%q: want \"true\" or \"false\"", ParamDeleteObjects, v)
	}
	var unknown []string
	for k, v := range params {
		switch {
		case k == ParamBucketName || k == ParamPrefix || k == ParamDeleteObjects || strings.HasPrefix(k, reservedPrefix):
		case passThrough[k] || strings.HasPrefix(k, envAttrPrefix):
			p.attributes[k] = v
		default:
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return p, fmt.Errorf("unknown parameters %s (known: %s, %s, %s and the static volume attributes)",
			strings.Join(unknown, ", "), ParamBucketName, ParamPrefix, ParamDeleteObjects)
	}
	// The template is checked once with sample values, so a bad class fails before any volume exists.
	if _, err := expandPrefix(p.prefixTmpl, "pv", map[string]string{paramPVCName: "c", paramPVCNamespace: "n"}); err != nil {
		return p, err
	}
	return p, nil
}

// validateBucket accepts what S3 and S3-compatible servers name buckets with, and refuses the characters
// that would make a volume ID ambiguous or escape into a path.
func validateBucket(b string) error {
	if b == "" || len(b) > 255 {
		return fmt.Errorf("parameter %s=%q: must be 1 to 255 characters", ParamBucketName, b)
	}
	for _, r := range b {
		if r == ':' || r == '/' || unicode.IsSpace(r) || unicode.IsControl(r) {
			return fmt.Errorf("parameter %s=%q: a bucket name holds no ':', '/' or blanks (access point ARNs work for static volumes only)", ParamBucketName, b)
		}
	}
	return nil
}

// expandPrefix builds the volume's key prefix "<template expanded>/<pv>/" (or "<pv>/" without a
// template). The PV name always ends the prefix, so two volumes never share keys whatever the template.
func expandPrefix(tmpl, pvName string, params map[string]string) (string, error) {
	// One pass over the template: a value that holds a variable (a PVC named "${pv.name}") is not expanded
	// again, which one replacement after another would do or not depending on the map's order.
	var pairs []string
	for _, v := range slices.Sorted(maps.Keys(templateVars)) {
		if !strings.Contains(tmpl, v) {
			continue
		}
		val := pvName
		if key := templateVars[v]; key != "" {
			if val = params[key]; val == "" {
				return "", fmt.Errorf("parameter %s=%q uses %s, which needs the csi-provisioner's --extra-create-metadata", ParamPrefix, tmpl, v)
			}
		}
		pairs = append(pairs, v, val)
	}
	s := strings.NewReplacer(pairs...).Replace(tmpl)
	if strings.Contains(s, "${") {
		return "", fmt.Errorf("parameter %s=%q: only ${pvc.namespace}, ${pvc.name} and ${pv.name} may be used", ParamPrefix, tmpl)
	}
	s = strings.Trim(s, "/")
	if s != "" {
		for _, seg := range strings.Split(s, "/") {
			// Mountpoint cannot show "." or ".." directories, and an empty segment would be a "//" key.
			if seg == "" || seg == "." || seg == ".." {
				return "", fmt.Errorf("parameter %s=%q: path segments may not be empty, '.' or '..'", ParamPrefix, tmpl)
			}
		}
		s += "/"
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return "", fmt.Errorf("parameter %s=%q holds a control character", ParamPrefix, tmpl)
		}
	}
	// The name is the prefix's last segment, held to the template's rules.
	if pvName == "" || pvName == "." || pvName == ".." || strings.ContainsAny(pvName, "/:") || strings.IndexFunc(pvName, unicode.IsControl) >= 0 {
		return "", fmt.Errorf("name %q: must be non-empty, not '.' or '..', without '/', ':' or control characters", pvName)
	}
	prefix := s + pvName + "/"
	if len(prefix) > 512 {
		return "", fmt.Errorf("parameter %s=%q: the volume's prefix %q is longer than 512 bytes", ParamPrefix, tmpl, prefix)
	}
	return prefix, nil
}
