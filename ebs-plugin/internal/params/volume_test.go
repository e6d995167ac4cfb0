package params

import (
	"maps"
	"strings"
	"testing"
)

func TestVolumeContext(t *testing.T) {
	tests := []struct {
		name    string
		in      map[string]string
		want    map[string]string
		wantErr string
	}{
		{name: "nothing to pass", in: map[string]string{"type": "gp2"}, want: nil},
		{name: "blockAttachUntilInitialized true", in: map[string]string{"blockAttachUntilInitialized": "true"},
			want: map[string]string{ContextBlockAttachUntilInitialized: "true"}},
		{name: "blockAttachUntilInitialized false", in: map[string]string{"blockAttachUntilInitialized": "false"}, want: nil},
		{name: "with format options", in: map[string]string{"blockattachuntilinitialized": "t", "inodeSize": "512"},
			want: map[string]string{ContextBlockAttachUntilInitialized: "true", ContextInodeSize: "512"}},
		{name: "invalid", in: map[string]string{"blockAttachUntilInitialized": "maybe"}, wantErr: `"blockAttachUntilInitialized"="maybe"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v, err := ParseVolume(tc.in, false)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := v.Context(); !maps.Equal(got, tc.want) || (tc.want == nil && got != nil) {
				t.Errorf("Context() = %#v, want %#v", got, tc.want)
			}
		})
	}
}
