package mounter

import (
	"fmt"
	"strings"
	"unicode"
)

// ParseMountFlags validates the mount flags of a VolumeCapability: each flag may itself hold a
// comma-separated list, whose commas inside double quotes do not separate (see splitOptions). It returns the flags split, trimmed and deduplicated in first-seen order. Flags that
// would change what is mounted rather than how ("bind", "remount") and characters that mount(8) would
// misread are refused.
func ParseMountFlags(flags []string) ([]string, error) {
	seen := map[string]bool{}
	var out []string
	for _, f := range flags {
		for _, opt := range splitOptions(f) {
			opt = strings.TrimSpace(opt)
			if opt == "" {
				continue
			}
			if len(opt) > 256 {
				return nil, fmt.Errorf("mount flag %.32q... is longer than 256 characters", opt)
			}
			for _, r := range opt {
				if unicode.IsSpace(r) || !unicode.IsPrint(r) || r > unicode.MaxASCII {
					return nil, fmt.Errorf("mount flag %q contains a space or non-printable character", opt)
				}
			}
			switch opt {
			case "bind", "rbind", "remount", "move", "make-shared", "make-private":
				return nil, fmt.Errorf("mount flag %q is not allowed", opt)
			}
			if strings.HasPrefix(opt, "-") {
				return nil, fmt.Errorf("mount flag %q must not start with '-'", opt)
			}
			if !seen[opt] {
				seen[opt] = true
				out = append(out, opt)
			}
		}
	}
	return out, nil
}

// splitOptions splits a comma-separated list of mount options at the commas outside double quotes. The
// kubelet passes the SELinux label of a volume on a CSIDriver with seLinuxMount as one option,
// context="system_u:object_r:container_file_t:s0:c12,c34", whose categories are separated by a comma that
// mount(8) and the kernel read inside the quotes: split there, the option would become two invalid ones.
func splitOptions(list string) []string {
	var opts []string
	start, quoted := 0, false
	for i, r := range list {
		switch r {
		case '"':
			quoted = !quoted
		case ',':
			if !quoted {
				opts = append(opts, list[start:i])
				start = i + 1
			}
		}
	}
	return append(opts, list[start:])
}
