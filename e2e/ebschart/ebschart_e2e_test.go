//go:build e2e

package ebschart_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stowage-csi/stowage/e2e/ebsinstall"
	"github.com/stowage-csi/stowage/e2e/ebsstack"
	"github.com/stowage-csi/stowage/e2e/kubeletsim"
)

// TestE2EEBSChartOnRealNodes installs stowage-ebs with `helm install` and its default values, overriding only
// the images (assembled here), the pull policy and the emulator's endpoints (package ebsinstall), on three
// real nodes: A and B in us-east-1a, C in us-east-1b. The real kubelets register the driver and the startup
// taint goes; then the EBS lifecycle of `make demo` (package ebsstack's scenarios, and the bad parameter)
// runs on them: the Pods are real containers and the kubelet calls NodeStage, NodePublish and
// NodeExpandVolume. It ends with no volume in EC2 and no CSI mount on any node. Move runs without the
// pre-stop hook of the process test (TestE2EEBSLifecycle): holding a node plugin's pre-stop needs the plugin
// as a process of the test, and no node is drained here. Then the containers that serve claims in flight are
// killed (containersKilled), and three broken installs on the same nodes each
// fail with the reason the API server or the kubelet gave. After the teardown no loop device or mount of
// the run is left on the host.
func TestE2EEBSChartOnRealNodes(t *testing.T) {
	dir := t.TempDir()
	// Registered before the install's own cleanup, so it runs after the teardown.
	t.Cleanup(func() {
		if loops := ebsstack.LoopDevicesUnder(dir); len(loops) > 0 {
			t.Errorf("loop devices left after the teardown: %v", loops)
		}
		if mounts, err := kubeletsim.MountsUnder(dir); err != nil || len(mounts) > 0 {
			t.Errorf("mounts left after the teardown: %v (%v)", mounts, err)
		}
	})
	zone := func(z string) string { return ebsinstall.Region + z }
	s := ebsinstall.ForTest(t, ebsinstall.Options{Zones: []string{zone("a"), zone("a"), zone("b")}, Dir: dir})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	p, err := ebsstack.OnRealNodes(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	report := ebsstack.NewReport(&out)
	l, err := ebsstack.NewLifecycleOn(p, report)
	if err != nil {
		t.Fatal(err)
	}
	ebsstack.RunScenarios(t, ctx, l.TestScenarios(ebsstack.Scenario{Name: "move", Run: l.Move}), report, &out)
	if t.Failed() {
		return
	}
	if vols := s.EC2.State().Volumes; len(vols) > 0 {
		t.Errorf("EC2 still holds %d volumes: %v", len(vols), vols)
	}
	for _, name := range p.NodeNames() {
		if mounts, err := p.Node(name).CSIMountsLeft(); err != nil || len(mounts) > 0 {
			t.Errorf("CSI mounts left on %s: %v (%v)", name, mounts, err)
		}
	}
	t.Run("ContainersKilled", func(t *testing.T) { containersKilled(t, ctx, s, p) })

	// The install's checks are what every test on these nodes stands on: a node plugin the kubelet cannot
	// register, and chart values that keep the node Pod from starting, must each fail the install with what
	// the API server or the kubelet said, not pass unnoticed. Each reinstall is bounded so the failure comes in minutes.
	t.Run("BrokenRegistration", func(t *testing.T) {
		// The registrar hands the kubelet a socket nobody serves: the kubelet's NodeGetInfo fails, the
		// registrar hears so and exits, as upstream's does.
		err := reinstallFailing(t, s, map[string]any{"sidecars": map[string]any{"nodeDriverRegistrar": map[string]any{
			"additionalArgs": []string{"--kubelet-registration-path=/var/lib/kubelet/plugins/nobody/csi.sock"}}}})
		for _, want := range []string{"container node-driver-registrar:", "exit code 1"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("the failed install's error lacks %q:\n%v", want, err)
			}
		}
	})
	t.Run("NodePodNotPrivileged", func(t *testing.T) {
		// The API server refuses the node plugin's Bidirectional mount propagation in a container that is not
		// privileged: the DaemonSet is not created.
		err := reinstallFailing(t, s, map[string]any{"node": map[string]any{"containerSecurityContext": map[string]any{"privileged": false}}})
		for _, want := range []string{"helm install", "ebs-csi-node", "Bidirectional mount propagation is available only to privileged containers"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("the failed install's error lacks %q:\n%v", want, err)
			}
		}
	})
	t.Run("KubeletPathElsewhere", func(t *testing.T) {
		// A kubelet root of another distribution (k0s's) that this node lacks: the kubelet cannot mount the
		// node plugin's kubelet-dir, and no container of the node Pod starts.
		err := reinstallFailing(t, s, map[string]any{"node": map[string]any{"kubeletPath": "/var/lib/k0s/kubelet"}})
		for _, want := range []string{"helm install", "container ebs-plugin: waiting: ContainerCreating", "FailedMount", "/var/lib/k0s/kubelet"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("the failed install's error lacks %q:\n%v", want, err)
			}
		}
	})
}

// reinstallFailing reinstalls the chart with values that break it and returns the install's error; the
// test fails if the install succeeds.
func reinstallFailing(t *testing.T, s *ebsinstall.Stack, values map[string]any) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 80*time.Second)
	defer cancel()
	err := s.Reinstall(ctx, values)
	if err == nil {
		t.Fatalf("the chart installed and registered with %v", values)
	}
	t.Logf("the install failed as it must:\n%v", err)
	return err
}
