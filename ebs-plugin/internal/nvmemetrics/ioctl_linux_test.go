//go:build linux

package nvmemetrics

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// The real ioctl path needs an EBS NVMe device (a Nitro instance); here it is shown to reach the kernel
// and to report what the kernel answers for a file that is not one.
func TestReadLogPageOfANonNVMeFileFailsWithTheKernelsAnswer(t *testing.T) {
	path := filepath.Join(t.TempDir(), "not-a-disk")
	if err := os.WriteFile(path, make([]byte, LogPageSize), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := NewSystem().ReadLogPage(path)
	if !errors.Is(err, syscall.ENOTTY) || !strings.Contains(err.Error(), path) {
		t.Fatalf("ReadLogPage(%s) = %v, want ENOTTY naming the file", path, err)
	}
	if _, err := NewSystem().ReadLogPage(filepath.Join(t.TempDir(), "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("ReadLogPage of a missing device = %v, want not-exist", err)
	}
}
