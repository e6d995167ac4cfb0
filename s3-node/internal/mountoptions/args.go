// Package mountoptions parses a PersistentVolume's mountOptions into Mountpoint's command-line arguments
// and applies Stowage's policy to them: an allow-list of the options Mountpoint users rely on (anything
// else is refused with the option's name, where upstream passes it on to mount-s3 blindly), and
// upstream's rewrites (read-only, fsGroup, retries, user agent, cache).
package mountoptions

import (
	"fmt"
	"sort"
	"strings"
	"unicode"
)

// Args is a set of Mountpoint arguments keyed by their long name with its "--"; a flag without a value
// maps to "". Values never hold control characters: they end up in argv.
type Args map[string]string

// Has reports whether key ("--k") is set.
func (a Args) Has(key string) bool {
	_, ok := a[key]
	return ok
}

// SetIfAbsent sets key to value unless it is set.
func (a Args) SetIfAbsent(key, value string) {
	if !a.Has(key) {
		a[key] = value
	}
}

// List returns the arguments as Mountpoint takes them, "--k=v" or "--k", sorted as upstream sends them.
func (a Args) List() []string {
	out := make([]string, 0, len(a))
	for k, v := range a {
		if v == "" {
			out = append(out, k)
		} else {
			out = append(out, k+"="+v)
		}
	}
	sort.Strings(out)
	return out
}

// Parse reads mount options in any of upstream's forms, "k v", "k=v", "k", each with or without leading
// dashes, into Args. It refuses what upstream refuses (fstab-style "-o", --ca-bundle), anything outside the
// allow-list, malformed keys, control characters, and a key given twice with different values (mount-s3
// would refuse that later, with a less helpful message). Mountpoint's own --foreground, --help and --version
// are dropped, as upstream.
func Parse(options []string) (Args, error) {
	args := Args{}
	for _, item := range options {
		key, value, err := split(item)
		if err != nil {
			return nil, err
		}
		if key == "" {
			continue
		}
		if _, drop := dropped[key]; drop {
			continue
		}
		if reason, ok := refused[key]; ok {
			return nil, fmt.Errorf("mount option %q is not supported: %s", item, reason)
		}
		kind, ok := allowed[key]
		if !ok {
			return nil, fmt.Errorf("mount option %q (%s) is not allowed; allowed options: %s", item, key, AllowedList())
		}
		if err := kind.check(key, value); err != nil {
			return nil, fmt.Errorf("mount option %q: %w", item, err)
		}
		if old, seen := args[key]; seen && old != value {
			return nil, fmt.Errorf("mount option %s given twice, with %q and %q", key, old, value)
		}
		args[key] = value
	}
	return args, nil
}

// split normalises one item into ("--k", value). Single-letter short options keep one dash.
func split(item string) (key, value string, err error) {
	s := strings.TrimSpace(item)
	if s == "" {
		return "", "", nil
	}
	if i := strings.IndexFunc(s, func(r rune) bool { return r == '=' || unicode.IsSpace(r) }); i >= 0 {
		key, value = s[:i], strings.TrimSpace(s[i+1:])
	} else {
		key = s
	}
	for _, r := range value {
		if unicode.IsControl(r) {
			return "", "", fmt.Errorf("mount option %q: the value holds a control character", item)
		}
	}
	if !strings.HasPrefix(key, "-") && len(key) == 1 {
		key = "-" + key // "o" alone reads as upstream's "-o"
	}
	name := strings.TrimLeft(key, "-")
	if name == "" {
		return "", "", fmt.Errorf("mount option %q has no name", item)
	}
	for _, r := range name {
		if (r < 'a' || r > 'z') && (r < '0' || r > '9') && r != '-' && (r < 'A' || r > 'Z') {
			return "", "", fmt.Errorf("mount option %q: the name may hold only letters, digits and dashes", item)
		}
	}
	if len(name) == 1 {
		return "-" + name, value, nil
	}
	return "--" + name, value, nil
}
