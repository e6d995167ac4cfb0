package testutil

import (
	"maps"
	"testing"
)

func TestFuzzMap(t *testing.T) {
	tests := []struct {
		in   string
		want map[string]string
	}{
		{in: "", want: map[string]string{}},
		{in: "type=gp3\niops=3000", want: map[string]string{"type": "gp3", "iops": "3000"}},
		{in: "a=1=2\nno equals\n=empty key\nb=", want: map[string]string{"a": "1=2", "": "empty key", "b": ""}},
		{in: "k=first\nk=second", want: map[string]string{"k": "second"}},
	}
	for _, tt := range tests {
		if got := FuzzMap(tt.in); !maps.Equal(got, tt.want) {
			t.Errorf("FuzzMap(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}
