package kubeletsim

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/sys/unix"
)

// MountsUnder lists the mount points at or below dir, deepest first (from /proc/self/mountinfo).
func MountsUnder(dir string) ([]string, error) {
	dir = filepath.Clean(dir)
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMountPath(fields[4])
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			out = append(out, mp)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	sort.Slice(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out, nil
}

// unescapeMountPath undoes mountinfo's octal escapes (\040 for a space and so on).
func unescapeMountPath(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var c byte
			if _, err := fmt.Sscanf(s[i+1:i+4], "%03o", &c); err == nil {
				b.WriteByte(c)
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
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
