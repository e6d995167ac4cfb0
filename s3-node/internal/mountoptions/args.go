// Package mountoptions parses a PersistentVolume's mountOptions into Mountpoint's command-line arguments
// and applies Stowage's policy to them: an allow-list of mount-s3's options (shared/mountpointopts; an
// option mount-s3 does not know is refused with its name, where upstream passes it on and mount-s3 exits
// 2), upstream's refusals, and upstream's rewrites (read-only, fsGroup, retries, user agent, cache).
package mountoptions

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"unicode"

	"github.com/stowage-csi/stowage/shared/mountpointopts"
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

// multiSep joins the values of a repeatable option (--bind) in Args; values never hold control characters,
// so it cannot occur inside one.
const multiSep = "\x00"

// List returns the arguments as Mountpoint takes them, "--k=v" or "--k", sorted as upstream sends them; a
// repeatable option gives one argument per value.
func (a Args) List() []string {
	out := make([]string, 0, len(a))
	for k, v := range a {
		if v == "" {
			out = append(out, k)
			continue
		}
		for _, one := range strings.Split(v, multiSep) {
			out = append(out, k+"="+one)
		}
	}
	sort.Strings(out)
	return out
}

// Parse reads mount options in any of upstream's forms, "k v", "k=v", "k", each with or without leading
// dashes, into Args. It follows Mountpoint's option list (shared/mountpointopts): options the node drops
// (--foreground, --help, --version, as upstream) are skipped; refused ones (fstab-style "-o", --ca-bundle,
// as upstream, and --auto-unmount, which mount-s3 refuses on the node's FUSE fd) fail with the option's name
// and the reason; so does anything mount-s3 does not know, where upstream passes it on and mount-s3 exits 2.
// Malformed keys, control characters, and a key given twice with different values (mount-s3 would refuse
// it later, with a less helpful message) fail too, except for options mount-s3 takes repeatedly (--bind).
// Short aliases become long names (-d is --debug).
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
		opt, long, ok := lookup(key)
		if !ok {
			return nil, fmt.Errorf("mount option %q (%s) is not a Mountpoint option; allowed options: %s", item, key, AllowedList())
		}
		switch opt.Node {
		case mountpointopts.Drop:
			continue
		case mountpointopts.Refuse:
			return nil, fmt.Errorf("mount option %q (%s) is not supported: %s", item, long, opt.Reason)
		}
		if err := check(opt, long, value); err != nil {
			return nil, fmt.Errorf("mount option %q: %w", item, err)
		}
		if err := args.add(opt, long, value); err != nil {
			return nil, err
		}
	}
	return args, nil
}

// add records key=value; a repeatable option keeps every distinct value.
func (a Args) add(opt mountpointopts.Option, key, value string) error {
	old, seen := a[key]
	switch {
	case !seen:
		a[key] = value
	case opt.Repeatable:
		if !slices.Contains(strings.Split(old, multiSep), value) {
			a[key] = old + multiSep + value
		}
	case old != value:
		return fmt.Errorf("mount option %s given twice, with %q and %q", key, old, value)
	}
	return nil
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
