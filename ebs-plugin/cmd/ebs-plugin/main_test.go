package main

import (
	"testing"
	"time"

	"github.com/stowage-csi/stowage/ebs-plugin/internal/driver"
)

func TestParseArgsKeepsUpstreamNamesAndDefaults(t *testing.T) {
	o, err := parseArgs(nil)
	if err != nil {
		t.Fatal(err)
	}
	c := o.cfg
	if c.Mode != driver.ModeAll || c.Endpoint != "unix://tmp/csi.sock" || c.MetadataSources != "imds,kubernetes" ||
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
				if o.cfg.Batching || o.cfg.ModifyVolumeWindow != 5*time.Second || o.cfg.KubernetesClusterID != "c1" || !o.otel {
					t.Errorf("%+v", o.cfg)
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
