// Package params parses and validates the parameters users hand the driver: StorageClass parameters,
// VolumeAttributesClass parameters, VolumeSnapshotClass parameters and tag templates. Every error names the
// offending key and value so the caller can return it as InvalidArgument unchanged.
package params

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Error is a rejected parameter. The driver maps it to codes.InvalidArgument.
type Error struct {
	Key    string
	Value  string
	Reason string
}

func (e *Error) Error() string {
	return fmt.Sprintf("parameter %q=%q: %s", e.Key, e.Value, e.Reason)
}

func invalid(key, value, format string, args ...any) *Error {
	return &Error{Key: key, Value: value, Reason: fmt.Sprintf(format, args...)}
}

// duplicateKey refuses two keys that name one parameter (canon maps a key to the parameter it names):
// ranging over the map, a parser would otherwise keep whichever came last, a different one from one call to
// the next. tagSpecification_N keys are each their own parameter.
func duplicateKey(raw map[string]string, canon func(string) string) *Error {
	seen := make(map[string]string, len(raw))
	for _, k := range slices.Sorted(maps.Keys(raw)) {
		if strings.HasPrefix(k, TagSpecificationPrefix) {
			continue
		}
		c := canon(k)
		if first, ok := seen[c]; ok {
			return invalid(k, raw[k], "names the same parameter as %q; give it once", first)
		}
		seen[c] = k
	}
	return nil
}
