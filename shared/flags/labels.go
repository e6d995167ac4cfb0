package flags

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Labels is the value of --leader-election-labels: "key:value,key2:value2". Repeating the flag adds labels.
type Labels map[string]string

// String renders the labels sorted by key, in the flag's own syntax.
func (l *Labels) String() string {
	if l == nil || len(*l) == 0 {
		return ""
	}
	items := make([]string, 0, len(*l))
	for _, k := range slices.Sorted(maps.Keys(*l)) {
		items = append(items, k+":"+(*l)[k])
	}
	return strings.Join(items, ",")
}

// Set parses "key:value,..." and rejects items that are not valid Kubernetes label keys and values, so a typo
// fails at start-up instead of when the lease is first written.
func (l *Labels) Set(value string) error {
	if *l == nil {
		*l = Labels{}
	}
	parsed := Labels{}
	for item := range strings.SplitSeq(value, ",") {
		key, val, ok := strings.Cut(item, ":")
		if !ok || strings.Contains(val, ":") {
			return fmt.Errorf("--leader-election-labels: malformed item %q, want key:value", item)
		}
		if errs := validation.IsQualifiedName(key); len(errs) > 0 {
			return fmt.Errorf("--leader-election-labels: invalid key %q: %s", key, strings.Join(errs, "; "))
		}
		if errs := validation.IsValidLabelValue(val); len(errs) > 0 {
			return fmt.Errorf("--leader-election-labels: invalid value %q for key %q: %s", val, key, strings.Join(errs, "; "))
		}
		parsed[key] = val
	}
	maps.Copy(*l, parsed)
	return nil
}
