package kubeletsim

import (
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/stowage-csi/stowage/e2e/rig"
)

// MountsUnder lists the mount points at or below dir, deepest first (from /proc/self/mountinfo).
func MountsUnder(dir string) ([]string, error) {
	dir = filepath.Clean(dir)
	out, err := rig.MountPoints("/proc/self/mountinfo", func(mp string) bool { return mp == dir || strings.HasPrefix(mp, dir+"/") })
	if err != nil {
		return nil, err
	}
	sort.Slice(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out, nil
}

// unmountAll unmounts everything mounted at or below dir, deepest first: the safety net of Stop for
// mounts the plugin did not take down.
func unmountAll(dir string) error {
	mps, err := MountsUnder(dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, mp := range mps {
		if err := unix.Unmount(mp, 0); err != nil && !errors.Is(err, unix.EINVAL) {
			if err := unix.Unmount(mp, unix.MNT_DETACH); err != nil {
				errs = append(errs, fmt.Errorf("unmount %s: %w", mp, err))
			}
		}
	}
	return errors.Join(errs...)
}
