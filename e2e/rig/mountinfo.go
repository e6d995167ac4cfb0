package rig

import (
	"bufio"
	"fmt"
	"os"
	"strings"
)

// MountPoints lists the mount points of the mount table mountinfo (/proc/self/mountinfo, or a real node's
// /proc/<pid>/mountinfo) that keep accepts, unescaped, in the table's order.
func MountPoints(mountinfo string, keep func(mountPoint string) bool) ([]string, error) {
	f, err := os.Open(mountinfo)
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
		if mp := UnescapeMountPath(fields[4]); keep(mp) {
			out = append(out, mp)
		}
	}
	return out, sc.Err()
}

// UnescapeMountPath undoes mountinfo's octal escapes (\040 for a space and so on).
func UnescapeMountPath(s string) string {
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
