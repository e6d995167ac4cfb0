//go:build !linux

package nvmemetrics

import (
	"errors"
	"fmt"
)

// ReadLogPage fails: the NVMe admin ioctl is Linux's.
func (s *System) ReadLogPage(path string) ([]byte, error) {
	return nil, fmt.Errorf("%s: %w", path, errors.ErrUnsupported)
}
