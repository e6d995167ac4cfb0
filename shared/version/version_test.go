package version

import (
	"bytes"
	"testing"
)

func TestVersionStrings(t *testing.T) {
	tests := []struct {
		binary    string
		wantLine  string
		wantAgent string
	}{
		{binary: "csi-attacher", wantLine: "csi-attacher " + Version, wantAgent: "csi-attacher/" + Version},
		{binary: "csi-provisioner", wantLine: "csi-provisioner " + Version, wantAgent: "csi-provisioner/" + Version},
	}
	for _, tt := range tests {
		t.Run(tt.binary, func(t *testing.T) {
			if got := String(tt.binary); got != tt.wantLine {
				t.Errorf("String() = %q, want %q", got, tt.wantLine)
			}
			if got := UserAgent(tt.binary); got != tt.wantAgent {
				t.Errorf("UserAgent() = %q, want %q", got, tt.wantAgent)
			}
			var buf bytes.Buffer
			if err := Print(&buf, tt.binary); err != nil {
				t.Fatal(err)
			}
			if got := buf.String(); got != tt.wantLine+"\n" {
				t.Errorf("Print() wrote %q, want %q", got, tt.wantLine+"\n")
			}
		})
	}
}

func TestVersionDefaultsToDev(t *testing.T) {
	// Unit tests are not linked with -X, so the default must show through.
	if Version != "dev" {
		t.Errorf("Version = %q without -ldflags, want %q", Version, "dev")
	}
}
