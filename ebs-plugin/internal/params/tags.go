package params

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"text/template"

	"k8s.io/klog/v2"
)

// VolumeTemplateData is what tagSpecification_N templates of a StorageClass or VolumeAttributesClass see.
type VolumeTemplateData struct {
	PVCName      string
	PVCNamespace string
	PVName       string
}

// SnapshotTemplateData is what tagSpecification_N templates of a VolumeSnapshotClass see.
type SnapshotTemplateData struct {
	VolumeSnapshotName        string
	VolumeSnapshotNamespace   string
	VolumeSnapshotContentName string
}

const (
	maxTagKeyLen   = 128
	maxTagValueLen = 256
	// maxTemplateOutput bounds what a template may render, so a hostile class cannot make the driver build
	// a huge string before the length check.
	maxTemplateOutput = 4096
)

var errDisabledFunc = errors.New("function is disabled in tag templates")

func disabled(...any) (string, error) { return "", errDisabledFunc }

// templateFuncs are upstream's helpers (pkg/util/template), with upstream's argument order: the string
// searched comes last, so `.PVCNamespace | contains "prod"` asks whether the namespace contains "prod".
// js, call, html and urlquery are replaced by a function that fails, because a tag value has no use for
// them and call can invoke arbitrary methods.
var templateFuncs = template.FuncMap{
	"field": func(delim string, index int, input string) (string, error) {
		parts := strings.Split(input, delim)
		if index < 0 || index >= len(parts) {
			return "", fmt.Errorf("field index %d out of range for %d fields", index, len(parts))
		}
		return parts[index], nil
	},
	"substring": substring,
	"toUpper":   strings.ToUpper,
	"toLower":   strings.ToLower,
	"contains":  func(sub, s string) bool { return strings.Contains(s, sub) },
	"index":     func(sub, s string) int { return strings.Index(s, sub) },
	"lastIndex": func(sub, s string) int { return strings.LastIndex(s, sub) },
	"js":        disabled,
	"call":      disabled,
	"html":      disabled,
	"urlquery":  disabled,
}

// substring returns s[start:end] with the indexes clamped into s, as upstream does where its slicing stays in
// range (a negative start reads from 0; a negative or too large end reads to the end). Where upstream's
// slice would panic (start past the end, start after end) the result is empty instead of an error, so a
// class written against names of varying length keeps working.
func substring(start, end int, s string) string {
	start = max(start, 0)
	if end < 0 || end > len(s) {
		end = len(s)
	}
	if start >= end {
		return ""
	}
	return s[start:end]
}

type limitedWriter struct {
	b strings.Builder
}

func (w *limitedWriter) Write(p []byte) (int, error) {
	if w.b.Len()+len(p) > maxTemplateOutput {
		return 0, fmt.Errorf("template output longer than %d bytes", maxTemplateOutput)
	}
	return w.b.Write(p)
}

// RenderTags evaluates "key=template" specs with data and returns the tags. key is the parameter key used in
// error messages. Reserved keys are refused.
func RenderTags(specs []string, data any) (map[string]string, error) {
	tags := map[string]string{}
	for _, spec := range specs {
		k, v, err := RenderTag(spec, data)
		if err != nil {
			return nil, err
		}
		tags[k] = v
	}
	return tags, nil
}

// RenderTag evaluates one "key=template" spec.
func RenderTag(spec string, data any) (string, string, error) {
	key, tmplText, ok := strings.Cut(spec, "=")
	if !ok {
		return "", "", invalid(TagSpecificationPrefix, spec, `must be "key=value"`)
	}
	key = strings.TrimSpace(key)
	tmpl, err := template.New("tag").Option("missingkey=error").Funcs(templateFuncs).Parse(tmplText)
	if err != nil {
		return "", "", invalid(TagSpecificationPrefix, spec, "bad template: %v", err)
	}
	var w limitedWriter
	if err := tmpl.Execute(&w, data); err != nil {
		return "", "", invalid(TagSpecificationPrefix, spec, "template failed: %v", err)
	}
	value := w.b.String()
	if err := ValidateUserTag(key, value); err != nil {
		return "", "", err
	}
	return key, value, nil
}

// ValidateUserTag refuses empty, oversized and reserved tag keys.
func ValidateUserTag(key, value string) error {
	switch {
	case key == "":
		return invalid("tag", key+"="+value, "tag key is empty")
	case len(key) > maxTagKeyLen:
		return invalid("tag", key, "tag key longer than %d characters", maxTagKeyLen)
	case len(value) > maxTagValueLen:
		return invalid("tag", key+"="+value, "tag value longer than %d characters", maxTagValueLen)
	case IsReservedTagKey(key):
		return invalid("tag", key, "tag key is reserved for the driver")
	}
	return nil
}

// IsReservedTagKey reports whether key belongs to the driver (upstream's list).
func IsReservedTagKey(key string) bool {
	switch key {
	case TagCSIVolumeName, TagCSIVolumeSnapshotName, TagClusterName:
		return true
	}
	return strings.HasPrefix(key, "kubernetes.io") || strings.HasPrefix(key, "ebs.csi.aws.com/")
}

// RenderTagsWarnOnly is RenderTags for --warn-on-invalid-tag: an invalid spec is logged and skipped
// instead of failing the request (upstream's escape hatch for classes written before validation). With
// warnOnly false it is RenderTags.
func RenderTagsWarnOnly(ctx context.Context, specs []string, data any, warnOnly bool) (map[string]string, error) {
	if !warnOnly {
		return RenderTags(specs, data)
	}
	tags := map[string]string{}
	for _, spec := range specs {
		k, v, err := RenderTag(spec, data)
		if err != nil {
			klog.FromContext(ctx).Info("Skipping invalid tag", "err", err.Error())
			continue
		}
		tags[k] = v
	}
	return tags, nil
}

// ParseExtraTags parses --extra-tags values, each "k1=v1,k2=v2", into key -> value. Values are literal, as
// upstream's: only class tags (tagSpecification_N) are templates, so an extra tag reads the same on every volume
// and snapshot, and a value written for a volume's template data cannot fail a snapshot. Repeated flags merge, a
// later key overriding an earlier one, as upstream's map flag does; keys and values are trimmed. Keys are
// validated here, so a bad flag fails at start-up, not per volume.
func ParseExtraTags(values ...string) (map[string]string, error) {
	tags := map[string]string{}
	for _, s := range values {
		for _, kv := range strings.Split(s, ",") {
			if strings.TrimSpace(kv) == "" {
				continue
			}
			k, v, ok := strings.Cut(kv, "=")
			if !ok {
				return nil, invalid("extra-tags", kv, `must be "key=value"`)
			}
			k, v = strings.TrimSpace(k), strings.TrimSpace(v)
			if err := ValidateUserTag(k, v); err != nil {
				return nil, err
			}
			tags[k] = v
		}
	}
	return tags, nil
}

// TagFlags are the driver flags that add tags to every volume and snapshot.
type TagFlags struct {
	ClusterID string            // --k8s-tag-cluster-id
	Extra     map[string]string // --extra-tags, parsed
}

// VolumeTags are a new volume's tags in upstream's order, each layer overriding the one before: the driver's
// own (name, cluster, claim and PV names), --k8s-tag-cluster-id's, --extra-tags, then the class's rendered
// tags. User layers cannot reach the driver's keys (ValidateUserTag refuses them), so the order decides
// between the user's layers and over the cluster ID's Name and KubernetesCluster.
func VolumeTags(name string, vp *Volume, flags TagFlags, classTags map[string]string) map[string]string {
	tags := map[string]string{TagCSIVolumeName: name, TagCluster: "true"}
	for k, v := range map[string]string{TagPVCName: vp.PVCName, TagPVCNamespace: vp.PVCNamespace, TagPVName: vp.PVName} {
		if v != "" {
			tags[k] = v
		}
	}
	if id := flags.ClusterID; id != "" {
		tags["kubernetes.io/cluster/"+id] = "owned"
		tags["Name"] = id + "-dynamic-" + name
		tags["KubernetesCluster"] = id
		tags[TagClusterName] = id
	}
	maps.Copy(tags, flags.Extra)
	maps.Copy(tags, classTags)
	if vp.IOPSPerGB > 0 {
		tags[TagIOPSPerGB] = strconv.Itoa(int(vp.IOPSPerGB))
	}
	if vp.AllowIOPSIncreaseOnModify {
		tags[TagAllowIOPSIncrease] = "true"
	}
	return tags
}

// SnapshotTags are a new snapshot's tags in upstream's order: the driver's own, --k8s-tag-cluster-id's,
// --extra-tags, then the snapshot class's rendered tags.
func SnapshotTags(name string, flags TagFlags, classTags map[string]string) map[string]string {
	tags := map[string]string{TagCSIVolumeSnapshotName: name, TagCluster: "true"}
	if id := flags.ClusterID; id != "" {
		tags["kubernetes.io/cluster/"+id] = "owned"
		tags["Name"] = id + "-dynamic-" + name
		tags[TagClusterName] = id
	}
	maps.Copy(tags, flags.Extra)
	maps.Copy(tags, classTags)
	return tags
}
