package config

import (
	"flag"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseLabels(t *testing.T) {
	tests := []struct {
		in       string
		want     map[string]string
		warnings int
		wantErr  bool
	}{
		{"", nil, 0, false},
		{`{}`, map[string]string{}, 0, false},
		{`{"team":"storage","example.com/tier":"gold"}`, map[string]string{"team": "storage", "example.com/tier": "gold"}, 0, false},
		{`{"s3.csi.aws.com/volume-id":"x","ok":"1"}`, map[string]string{"ok": "1"}, 1, false},
		{`{"bad key!":"x","long":"` + strings.Repeat("v", 64) + `"}`, map[string]string{}, 2, false},
		{`["not","an","object"]`, nil, 0, true},
		{`{"n":1}`, nil, 0, true},
	}
	for _, tt := range tests {
		var warnings int
		got, err := ParseLabels(tt.in, func(string, ...any) { warnings++ })
		if (err != nil) != tt.wantErr || !reflect.DeepEqual(got, tt.want) || warnings != tt.warnings {
			t.Errorf("ParseLabels(%s) = %v, %v with %d warnings; want %v, error %v, %d warnings", tt.in, got, err, warnings, tt.want, tt.wantErr, tt.warnings)
		}
	}
	// Annotation values need not be label values.
	got, err := ParseAnnotations(`{"note":"`+strings.Repeat("v", 100)+` with spaces"}`, func(string, ...any) {})
	if err != nil || len(got) != 1 {
		t.Fatalf("ParseAnnotations: %v, %v", got, err)
	}
}

func TestFlagsAndEnvironment(t *testing.T) {
	env := map[string]string{"MOUNTPOINT_NAMESPACE": "mp-ns", "MOUNTPOINT_VERSION": "1.23.0", "MOUNTPOINT_IMAGE": "img:1",
		"MOUNTPOINT_IMAGE_PULL_POLICY": "Always", "MOUNTPOINT_POD_LABELS": `{"a":"b"}`}
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	c := Register(fs, func(k string) string { return env[k] })
	if err := fs.Parse([]string{"--mountpoint-version=1.24.0", "--stale-attachment-interval=5s"}); err != nil {
		t.Fatal(err)
	}
	if err := c.Parse(func(string, ...any) {}); err != nil {
		t.Fatal(err)
	}
	m := c.MountpointPod
	if m.Namespace != "mp-ns" || m.MountpointVersion != "1.24.0" || m.Image != "img:1" || m.ImagePullPolicy != "Always" ||
		m.PriorityClassName != DefaultPriorityClassName || m.Command != DefaultCommand || m.PodLabels["a"] != "b" ||
		!c.LeaderElection || c.StaleInterval != 5*time.Second || m.HeadroomEnabled() {
		t.Fatalf("config %+v", c)
	}

	fs = flag.NewFlagSet("t", flag.ContinueOnError)
	c = Register(fs, func(string) string { return "" })
	_ = fs.Parse([]string{"--mountpoint-image-pull-policy=Sometimes"})
	if err := c.Parse(func(string, ...any) {}); err == nil || !strings.Contains(err.Error(), "--mountpoint-image-pull-policy") {
		t.Fatalf("error %v, want one naming the flag", err)
	}
	if c.MountpointPod.Namespace != "mount-s3" {
		t.Fatalf("default namespace %q", c.MountpointPod.Namespace)
	}
}

// Dynamic provisioning is off unless --csi-endpoint is given; the S3 endpoint defaults to the SDK's own
// variables, so the error messages name the server the SDK really uses.
func TestDynamicProvisioningFlags(t *testing.T) {
	for _, tc := range []struct {
		env          map[string]string
		args         []string
		wantEndpoint string
		wantCSI      string
	}{
		{env: map[string]string{}, wantEndpoint: ""},
		{env: map[string]string{"AWS_ENDPOINT_URL": "http://any:9000"}, wantEndpoint: "http://any:9000"},
		{env: map[string]string{"AWS_ENDPOINT_URL": "http://any:9000", "AWS_ENDPOINT_URL_S3": "http://s3:9000"}, wantEndpoint: "http://s3:9000"},
		{env: map[string]string{"AWS_ENDPOINT_URL_S3": "http://s3:9000"}, args: []string{"--s3-endpoint-url=http://flag:1", "--csi-endpoint=unix:///csi/csi.sock", "--s3-force-path-style"},
			wantEndpoint: "http://flag:1", wantCSI: "unix:///csi/csi.sock"},
	} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		c := Register(fs, func(k string) string { return tc.env[k] })
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		if err := c.Parse(func(string, ...any) {}); err != nil {
			t.Fatal(err)
		}
		if c.S3EndpointURL != tc.wantEndpoint || c.CSIEndpoint != tc.wantCSI || c.S3ForcePathStyle != (tc.wantCSI != "") {
			t.Errorf("env %v args %v: endpoint %q csi %q path style %v", tc.env, tc.args, c.S3EndpointURL, c.CSIEndpoint, c.S3ForcePathStyle)
		}
	}
}
