package main

import (
	"reflect"
	"testing"
	"time"

	"github.com/stowage-csi/stowage/e2e/ec2sim"
)

func TestParseFlags(t *testing.T) {
	cfg, err := parseFlags([]string{
		"--data-dir=/tmp/x", "--region=eu-west-2", "--zones=eu-west-2a,eu-west-2b", "--time-scale=0.5",
		"--instance", "id=i-01,zone=eu-west-2a,type=m5.large,local=true", "--instance=id=i-02,zone=eu-west-2b",
		`--faults={"throttleRate":0.25,"stuckAttach":true,"slow":{"AttachVolume":{"rate":0.5,"latency":3000000000}}}`, "--limits=ec2", "--modify-cooldown=6h",
		"--access-key-id=AK", "--secret-access-key=SK",
	})
	if err != nil {
		t.Fatal(err)
	}
	want := ec2sim.Config{
		Listen: "127.0.0.1:0", DataDir: "/tmp/x", Region: "eu-west-2", Zones: []string{"eu-west-2a", "eu-west-2b"},
		Instances:     []ec2sim.Instance{{ID: "i-01", Zone: "eu-west-2a", Type: "m5.large", Local: true}, {ID: "i-02", Zone: "eu-west-2b"}},
		DeviceLinkDir: "/dev/disk/by-id", TimeScale: 0.5,
		Faults: ec2sim.Faults{ThrottleRate: 0.25, StuckAttach: true, Slow: map[string]ec2sim.SlowCalls{"AttachVolume": {Rate: 0.5, Latency: 3 * time.Second}}},
		Limits: ec2sim.EC2Limits(), ModifyCooldown: 6 * time.Hour, Credentials: &ec2sim.Credentials{AccessKeyID: "AK", SecretAccessKey: "SK"},
	}
	if !reflect.DeepEqual(cfg, want) {
		t.Errorf("config\n got %+v\nwant %+v", cfg, want)
	}
}

func TestParseFlagsRejectsBadInput(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"--data-dir=/x", "--instance=id=i-1"},
		{"--data-dir=/x", "--instance=id=i-1,zone=a,colour=red"},
		{"--data-dir=/x", "--instance=id=i-1,zone=a,local=maybe"},
		{"--data-dir=/x", "--faults={"},
		{"--data-dir=/x", "--limits=fast"},
	} {
		if _, err := parseFlags(args); err == nil {
			t.Errorf("%q accepted", args)
		}
	}
}
