package params

import (
	"errors"
	"fmt"
	"strings"
	"text/template"
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

// templateFuncs are upstream's helpers; js, call, html and urlquery are replaced by a function that fails,
// because a tag value has no use for them and call can invoke arbitrary methods.
var templateFuncs = template.FuncMap{
	"field": func(delim string, index int, input string) (string, error) {
		parts := strings.Split(input, delim)
		if index < 0 || index >= len(parts) {
			return "", fmt.Errorf("field index %d out of range for %d fields", index, len(parts))
		}
		return parts[index], nil
	},
	"substring": func(start, end int, s string) (string, error) {
		if start < 0 || end > len(s) || start > end {
			return "", fmt.Errorf("substring [%d:%d] out of range for length %d", start, end, len(s))
		}
		return s[start:end], nil
	},
	"toUpper":  strings.ToUpper,
	"toLower":  strings.ToLower,
	"contains": strings.Contains,
	"js":       disabled,
	"call":     disabled,
	"html":     disabled,
	"urlquery": disabled,
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

// ParseExtraTags parses the --extra-tags flag value "k1=v1,k2=v2".
func ParseExtraTags(s string) (map[string]string, error) {
	tags := map[string]string{}
	if strings.TrimSpace(s) == "" {
		return tags, nil
	}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return nil, invalid("extra-tags", kv, `must be "key=value"`)
		}
		k = strings.TrimSpace(k)
		if err := ValidateUserTag(k, v); err != nil {
			return nil, err
		}
		tags[k] = v
	}
	return tags, nil
}
