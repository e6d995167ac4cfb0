package mountoptions

import (
	"fmt"
	"sort"
	"strings"

	"github.com/stowage-csi/stowage/shared/mountpointopts"
)

// lookup finds key ("--k", "-k" or "--k" for a short alias) in Mountpoint's option list and returns the
// option with the key normalised to its long form. Upstream drops "-v" although mount-s3 has no such
// option (its version flag is -V); it is kept here so manifests written for upstream still work.
func lookup(key string) (mountpointopts.Option, string, bool) {
	if key == "-v" {
		return mountpointopts.Option{Name: "v", Node: mountpointopts.Drop}, key, true
	}
	o, ok := mountpointopts.Lookup(strings.TrimLeft(key, "-"))
	if !ok {
		return o, key, false
	}
	return o, o.Flag(), true
}

// check applies the option's shape (value or not) to v.
func check(o mountpointopts.Option, key, v string) error {
	switch {
	case !o.Value && v != "":
		return fmt.Errorf("%s takes no value", key)
	case o.Value && v == "":
		return fmt.Errorf("%s needs a value", key)
	}
	return nil
}

// AllowedList names the options a volume may set (every mount-s3 option the node passes on or rewrites),
// sorted, for error messages.
func AllowedList() string {
	var names []string
	for _, o := range mountpointopts.All() {
		if o.Node == mountpointopts.Pass || o.Node == mountpointopts.Rewrite {
			names = append(names, o.Name)
		}
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}
