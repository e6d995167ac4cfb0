// Package params parses and validates the parameters users hand the driver: StorageClass parameters,
// VolumeAttributesClass parameters, VolumeSnapshotClass parameters and tag templates. Every error names the
// offending key and value so the caller can return it as InvalidArgument unchanged.
package params

import "fmt"

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
