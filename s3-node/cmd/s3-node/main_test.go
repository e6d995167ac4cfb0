package main

import (
	"testing"
	"time"
)

func TestParseArgsUpstreamFlagsAndEnv(t *testing.T) {
	env := map[string]string{"CSI_NODE_NAME": "node-a", "MOUNTPOINT_VERSION": "1.23.0", "MOUNTPOINT_NAMESPACE": "mp", "CONTAINER_KUBELET_PATH": "/k"}
	o, err := parseArgs([]string{"--endpoint=unix:/var/lib/kubelet/plugins/s3.csi.aws.com/csi.sock", "--v=4"}, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	c := o.cfg
	if c.NodeID != "node-a" || c.MountpointVersion != "1.23.0" || c.Namespace != "mp" || c.KubeletPath != "/k" ||
		c.Endpoint != "unix:/var/lib/kubelet/plugins/s3.csi.aws.com/csi.sock" || c.UnmountInterval != 2*time.Minute {
		t.Fatalf("config %+v", c)
	}
	o, err = parseArgs([]string{"--node-id=x"}, func(string) string { return "" })
	if err != nil || o.cfg.Namespace != "mount-s3" || o.cfg.KubeletPath != "/var/lib/kubelet" || o.cfg.Endpoint != "unix://tmp/csi.sock" {
		t.Fatalf("defaults %+v, %v", o.cfg, err)
	}
	if _, err := parseArgs([]string{"--unmount-sweep-interval=0s"}, func(string) string { return "" }); err == nil {
		t.Fatal("a zero sweep interval was accepted")
	}
}
