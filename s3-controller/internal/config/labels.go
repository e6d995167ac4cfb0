package config

import (
	"encoding/json"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/stowage-csi/stowage/shared/s3api"
)

// reservedPrefix is the driver's own label and annotation domain: users may not set keys in it, since the
// controller and the node plugin read them (upstream drops them the same way).
const reservedPrefix = s3api.Group + "/"

// ParseLabels decodes a JSON object of labels. Keys under s3.csi.aws.com/, invalid keys and invalid values
// are dropped with a warning, as upstream's pkg/util/labels.go does; empty input means no labels.
func ParseLabels(raw string, warn func(msg string, kv ...any)) (map[string]string, error) {
	return parse(raw, warn, func(k, v string) []string {
		return append(validation.IsQualifiedName(k), validation.IsValidLabelValue(v)...)
	})
}

// ParseAnnotations is ParseLabels for annotations: only the key must be a qualified name.
func ParseAnnotations(raw string, warn func(msg string, kv ...any)) (map[string]string, error) {
	return parse(raw, warn, func(k, _ string) []string { return validation.IsQualifiedName(k) })
}

func parse(raw string, warn func(msg string, kv ...any), check func(k, v string) []string) (map[string]string, error) {
	if strings.TrimSpace(raw) == "" {
		return nil, nil
	}
	var in map[string]string
	if err := json.Unmarshal([]byte(raw), &in); err != nil {
		return nil, fmt.Errorf("not a JSON object of strings: %w", err)
	}
	out := make(map[string]string, len(in))
	for k, v := range in {
		if strings.HasPrefix(k, reservedPrefix) {
			warn("Dropping a key in the driver's reserved domain", "key", k)
			continue
		}
		if errs := check(k, v); len(errs) > 0 {
			warn("Dropping an invalid key or value", "key", k, "value", v, "errors", strings.Join(errs, "; "))
			continue
		}
		out[k] = v
	}
	return out, nil
}
