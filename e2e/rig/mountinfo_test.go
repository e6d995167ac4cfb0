package rig

import "testing"

func TestUnescapeMountPath(t *testing.T) {
	for in, want := range map[string]string{
		`/a/b`:          "/a/b",
		`/a\040b`:       "/a b",
		`/tab\011x`:     "/tab\tx",
		`/back\134sl`:   `/back\sl`,
		`/trailing\04`:  `/trailing\04`,
		`/not\xyzoctal`: `/not\xyzoctal`,
	} {
		if got := UnescapeMountPath(in); got != want {
			t.Errorf("UnescapeMountPath(%q) = %q, want %q", in, got, want)
		}
	}
}
