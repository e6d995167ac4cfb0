package mountpointopts

import (
	"reflect"
	"strings"
	"testing"
)

// FuzzLookup looks up option names as the node and s3-fuse do with what a PV's mountOptions hold (dashes
// already trimmed): no name panics; a name is found exactly when it is an option's long name or alias, never
// by a prefix, a case change or an empty alias; what is found is found again by its own flag.
func FuzzLookup(f *testing.F) {
	for _, s := range []string{"region", "f", "o", "", "Region", "regio", "read-only", "-", "sse", "sse-kms-key-id"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		o, ok := Lookup(name)
		want := false
		for _, a := range All() {
			want = want || a.Name == name || a.Short != "" && a.Short == name
		}
		if ok != want {
			t.Fatalf("Lookup(%q) found %v, want %v", name, ok, want)
		}
		if !ok {
			return
		}
		if again, ok := Lookup(strings.TrimLeft(o.Flag(), "-")); !ok || !reflect.DeepEqual(again, o) {
			t.Fatalf("Lookup(%q) = %+v, but its flag %s finds %+v", name, o, o.Flag(), again)
		}
		if o.Requires != "" {
			if _, ok := Lookup(o.Requires); !ok {
				t.Fatalf("%s requires %q, which is no option", o.Flag(), o.Requires)
			}
		}
	})
}
