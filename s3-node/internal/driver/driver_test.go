package driver

import "testing"

func TestParseEndpoint(t *testing.T) {
	tests := []struct{ in, network, addr string }{
		{"unix://tmp/csi.sock", "unix", "/tmp/csi.sock"}, // upstream's default, relative to /
		{"unix:///csi/csi.sock", "unix", "/csi/csi.sock"},
		{"unix:/var/lib/kubelet/plugins/s3.csi.aws.com/csi.sock", "unix", "/var/lib/kubelet/plugins/s3.csi.aws.com/csi.sock"}, // upstream's chart
		{"tcp://127.0.0.1:10000", "tcp", "127.0.0.1:10000"},
	}
	for _, tt := range tests {
		n, a, err := ParseEndpoint(tt.in)
		if err != nil || n != tt.network || a != tt.addr {
			t.Errorf("ParseEndpoint(%q) = %q %q %v", tt.in, n, a, err)
		}
	}
	for _, bad := range []string{"http://x", "unix://", "::"} {
		if _, _, err := ParseEndpoint(bad); err == nil {
			t.Errorf("ParseEndpoint(%q) accepted", bad)
		}
	}
}
