package main

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"

	"github.com/stowage-csi/stowage/ebs-plugin/internal/app"
	"github.com/stowage-csi/stowage/ebs-plugin/internal/driver"
	"github.com/stowage-csi/stowage/ebs-plugin/internal/params"
)

func TestParseArgsKeepsUpstreamNamesAndDefaults(t *testing.T) {
	o, err := parseArgs(nil)
	if err != nil {
		t.Fatal(err)
	}
	c := o.cfg
	if c.Mode != driver.ModeAll || c.Endpoint != "unix://tmp/csi.sock" || !slices.Equal(c.MetadataSources, []string{"imds,kubernetes"}) ||
		c.ModifyVolumeWindow != 2*time.Second || c.VolumeAttachLimit != -1 || c.ReservedVolumeAttachments != -1 ||
		c.DeviceLinkDir != "/dev/disk/by-id" || c.LegacyXFS || c.HTTPEndpoint != "" {
		t.Fatalf("defaults %+v", c)
	}
	if !c.Batching {
		t.Fatal("--batching must default to true in Stowage")
	}
}

func TestParseArgs(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantErr bool
		check   func(t *testing.T, o *options)
	}{
		{name: "mode and flags", args: []string{"node", "--endpoint=unix:///csi/csi.sock", "--volume-attach-limit=20", "--legacy-xfs", "-v=5"},
			check: func(t *testing.T, o *options) {
				if o.cfg.Mode != driver.ModeNode || o.cfg.Endpoint != "unix:///csi/csi.sock" || o.cfg.VolumeAttachLimit != 20 || !o.cfg.LegacyXFS {
					t.Errorf("%+v", o.cfg)
				}
			}},
		{name: "upstream manifest flags are accepted", args: []string{"controller", "--extra-tags=a=b", "--k8s-tag-cluster-id=c1", "--batching=false",
			"--logtostderr", "--extra-volume-tags=x=y", "--enable-otel-tracing", "--user-agent-extra=helm", "--modify-volume-request-handler-timeout=5s",
			"--http-endpoint=0.0.0.0:3301", "--logging-format=json", "--warn-on-invalid-tag", "--csi-mount-point-prefix=/var/lib/kubelet/plugins/kubernetes.io/csi/ebs.csi.aws.com/"},
			check: func(t *testing.T, o *options) {
				if o.cfg.Batching || o.cfg.ModifyVolumeWindow != 5*time.Second || o.cfg.KubernetesClusterID != "c1" || !o.cfg.WarnOnInvalidTag {
					t.Errorf("%+v", o.cfg)
				}
			}},
		{name: "pre-stop-hook as upstream's preStop command passes it", args: []string{"pre-stop-hook"},
			check: func(t *testing.T, o *options) {
				if o.cfg.Mode != app.ModePreStopHook {
					t.Errorf("mode %q, want %q", o.cfg.Mode, app.ModePreStopHook)
				}
			}},
		{name: "unknown flag", args: []string{"--no-such-flag"}, wantErr: true},
		{name: "stray argument", args: []string{"all", "extra"}, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o, err := parseArgs(tc.args)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v", err)
			}
			if err == nil {
				tc.check(t, o)
			}
		})
	}
}

func TestFlagsWithoutEffectAreWarnedAboutByName(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		wantWarn []string
	}{
		{name: "none set", args: []string{"node"}},
		{name: "each flag without effect", args: []string{"--logtostderr", "--csi-mount-point-prefix=/var/lib/kubelet/plugins/kubernetes.io/csi/ebs.csi.aws.com/",
			"--enable-otel-tracing", "--extra-volume-tags=a=b"},
			wantWarn: []string{"--logtostderr", "--csi-mount-point-prefix", "--enable-otel-tracing", "--extra-volume-tags"}},
		{name: "set to false is still set and ignored", args: []string{"--logtostderr=false"}, wantWarn: []string{"--logtostderr"}},
		{name: "--aws-sdk-debug-log works, so is not warned about", args: []string{"--aws-sdk-debug-log"}},
		{name: "--deprecated-metrics works, so is not warned about", args: []string{"--deprecated-metrics"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o, err := parseArgs(tc.args)
			if err != nil {
				t.Fatal(err)
			}
			var warned []string
			logger := funcr.New(func(_, args string) { warned = append(warned, args) }, funcr.Options{})
			warnNoEffect(logger, o.noEffect)
			if len(warned) != len(tc.wantWarn) {
				t.Fatalf("warnings %q, want one for each of %q", warned, tc.wantWarn)
			}
			for _, flag := range tc.wantWarn {
				if !slices.ContainsFunc(warned, func(w string) bool {
					return strings.Contains(w, `"flag"="`+flag+`"`) && strings.Contains(w, "no effect")
				}) {
					t.Errorf("no warning names %s as without effect: %q", flag, warned)
				}
			}
		})
	}
}

func TestAWSSDKDebugLogReachesTheConfig(t *testing.T) {
	o, err := parseArgs([]string{"controller", "--aws-sdk-debug-log"})
	if err != nil {
		t.Fatal(err)
	}
	if !o.cfg.AWSSDKDebugLog {
		t.Fatal("--aws-sdk-debug-log did not set Config.AWSSDKDebugLog")
	}
}

// TestRepeatedFlagsMerge: upstream merges repeated --extra-tags and --metadata-sources; the first value
// replaces --metadata-sources' default.
func TestRepeatedFlagsMerge(t *testing.T) {
	o, err := parseArgs([]string{"controller", "--extra-tags=a=1,b=2", "--extra-tags=b=3", "--metadata-sources=kubernetes", "--metadata-sources=imds"})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"a=1,b=2", "b=3"}; !slices.Equal(o.cfg.ExtraTags, want) {
		t.Errorf("ExtraTags = %q, want %q", o.cfg.ExtraTags, want)
	}
	if want := []string{"kubernetes", "imds"}; !slices.Equal(o.cfg.MetadataSources, want) {
		t.Errorf("MetadataSources = %q, want %q", o.cfg.MetadataSources, want)
	}
	tags, err := params.ParseExtraTags(o.cfg.ExtraTags...)
	if err != nil {
		t.Fatal(err)
	}
	if len(tags) != 2 || tags["a"] != "1" || tags["b"] != "3" {
		t.Errorf("merged tags = %v, want a=1 and the later b=3", tags)
	}
}

func TestDeprecatedMetricsReachesTheConfig(t *testing.T) {
	for args, want := range map[string]bool{"": false, "--deprecated-metrics": true, "--deprecated-metrics=false": false} {
		o, err := parseArgs(strings.Fields("controller " + args))
		if err != nil {
			t.Fatal(err)
		}
		if o.cfg.DeprecatedMetrics != want {
			t.Errorf("%q: DeprecatedMetrics = %v, want %v", args, o.cfg.DeprecatedMetrics, want)
		}
	}
}
