package mountpointopts

import (
	"strings"
	"testing"
)

func TestAllIsConsistent(t *testing.T) {
	seen := map[string]bool{}
	for _, o := range All() {
		for _, n := range []string{o.Name, o.Short} {
			if n == "" {
				continue
			}
			if seen[n] {
				t.Errorf("name or alias %q appears twice", n)
			}
			seen[n] = true
		}
		if o.Value != (o.Example != "") {
			t.Errorf("%s: Value=%v but Example=%q; a value option needs an example, a switch none", o.Name, o.Value, o.Example)
		}
		if (o.Node == Refuse || o.Node == Rewrite) && o.Reason == "" {
			t.Errorf("%s: a refused or rewritten option needs a reason", o.Name)
		}
		if r, ok := Lookup(o.Requires); o.Requires != "" && (!ok || r.Requires != "") {
			t.Errorf("%s requires %q, which is not a plain option", o.Name, o.Requires)
		}
		if o.Name != strings.ToLower(o.Name) || strings.HasPrefix(o.Name, "-") {
			t.Errorf("%s: names are lower case without dashes", o.Name)
		}
	}
}

func TestLookup(t *testing.T) {
	tests := []struct {
		name, want string
		ok         bool
	}{
		{"region", "region", true},
		{"f", "foreground", true},
		{"l", "log-directory", true},
		{"o", "o", true},
		{"V", "version", true},
		{"v", "", false}, // upstream drops -v, but mount-s3 has no -v: it is not in the list
		{"no-such-option", "", false},
	}
	for _, tt := range tests {
		got, ok := Lookup(tt.name)
		if ok != tt.ok || got.Name != tt.want {
			t.Errorf("Lookup(%q) = %q, %v; want %q, %v", tt.name, got.Name, ok, tt.want, tt.ok)
		}
	}
}

func TestAllReturnsAFreshSlice(t *testing.T) {
	a := All()
	a[0].Name = "changed"
	if All()[0].Name == "changed" {
		t.Fatal("All shares its slice between callers")
	}
}

func TestArg(t *testing.T) {
	r, _ := Lookup("region")
	o, _ := Lookup("o")
	d, _ := Lookup("debug")
	for got, want := range map[string]string{r.Arg(): "--region=us-west-2", o.Arg(): "-o=allow_other", d.Arg(): "--debug"} {
		if got != want {
			t.Errorf("Arg() = %q, want %q", got, want)
		}
	}
	m, _ := Lookup("max-cache-size")
	if got := m.Args(); len(got) != 2 || got[0] != "--cache=/tmp" {
		t.Errorf("Args() of --max-cache-size = %q, want --cache first", got)
	}
}
