package csiconn

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	csimetrics "github.com/kubernetes-csi/csi-lib-utils/metrics"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stowage-csi/stowage/shared/metrics"
	"github.com/stowage-csi/stowage/shared/testutil"
)

// connect dials d with a connection-loss hook that reports instead of exiting.
func connect(t *testing.T, d *testutil.FakeCSIDriver, m csimetrics.CSIMetricsManager) (*Conn, chan struct{}) {
	t.Helper()
	lost := make(chan struct{}, 1)
	c, err := Connect(context.Background(), Options{
		Address: d.Address,
		Timeout: 10 * time.Second,
		Metrics: m,
		OnConnectionLoss: func(context.Context) bool {
			select {
			case lost <- struct{}{}:
			default:
			}
			return false
		},
	})
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c, lost
}

func TestDiscovery(t *testing.T) {
	tests := []struct {
		name       string
		driver     *testutil.FakeCSIDriver
		wantPlugin []csi.PluginCapability_Service_Type
		notPlugin  []csi.PluginCapability_Service_Type
		wantCtrl   []csi.ControllerServiceCapability_RPC_Type
		notCtrl    []csi.ControllerServiceCapability_RPC_Type
		wantNode   []csi.NodeServiceCapability_RPC_Type
		wantGroup  []csi.GroupControllerServiceCapability_RPC_Type
		wantExpand []csi.PluginCapability_VolumeExpansion_Type
	}{
		{
			name: "controller driver with attach",
			driver: &testutil.FakeCSIDriver{
				Name:            "ebs.csi.aws.com",
				PluginServices:  []csi.PluginCapability_Service_Type{csi.PluginCapability_Service_CONTROLLER_SERVICE, csi.PluginCapability_Service_VOLUME_ACCESSIBILITY_CONSTRAINTS},
				PluginExpansion: []csi.PluginCapability_VolumeExpansion_Type{csi.PluginCapability_VolumeExpansion_ONLINE},
				ControllerCaps:  []csi.ControllerServiceCapability_RPC_Type{csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME, csi.ControllerServiceCapability_RPC_PUBLISH_UNPUBLISH_VOLUME},
				NodeCaps:        []csi.NodeServiceCapability_RPC_Type{csi.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME},
				GroupControllerCaps: []csi.GroupControllerServiceCapability_RPC_Type{
					csi.GroupControllerServiceCapability_RPC_CREATE_DELETE_GET_VOLUME_GROUP_SNAPSHOT},
			},
			wantPlugin: []csi.PluginCapability_Service_Type{csi.PluginCapability_Service_CONTROLLER_SERVICE, csi.PluginCapability_Service_VOLUME_ACCESSIBILITY_CONSTRAINTS},
			notPlugin:  []csi.PluginCapability_Service_Type{csi.PluginCapability_Service_GROUP_CONTROLLER_SERVICE},
			wantCtrl:   []csi.ControllerServiceCapability_RPC_Type{csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME, csi.ControllerServiceCapability_RPC_PUBLISH_UNPUBLISH_VOLUME},
			notCtrl:    []csi.ControllerServiceCapability_RPC_Type{csi.ControllerServiceCapability_RPC_LIST_VOLUMES},
			wantNode:   []csi.NodeServiceCapability_RPC_Type{csi.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME},
			wantGroup:  []csi.GroupControllerServiceCapability_RPC_Type{csi.GroupControllerServiceCapability_RPC_CREATE_DELETE_GET_VOLUME_GROUP_SNAPSHOT},
			wantExpand: []csi.PluginCapability_VolumeExpansion_Type{csi.PluginCapability_VolumeExpansion_ONLINE},
		},
		{
			name:      "node-only driver",
			driver:    &testutil.FakeCSIDriver{Name: "s3.csi.aws.com"},
			notPlugin: []csi.PluginCapability_Service_Type{csi.PluginCapability_Service_CONTROLLER_SERVICE},
			notCtrl:   []csi.ControllerServiceCapability_RPC_Type{csi.ControllerServiceCapability_RPC_PUBLISH_UNPUBLISH_VOLUME},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := testutil.StartFakeCSIDriver(t, tt.driver)
			c, _ := connect(t, d, nil)
			ctx := context.Background()
			if err := c.ProbeUntilReady(ctx); err != nil {
				t.Fatalf("ProbeUntilReady: %v", err)
			}
			name, err := c.DriverName(ctx)
			if err != nil || name != tt.driver.Name {
				t.Fatalf("DriverName() = %q, %v, want %q", name, err, tt.driver.Name)
			}
			plugin, err := c.PluginCapabilities(ctx)
			if err != nil {
				t.Fatal(err)
			}
			// One answer lists services and expansion modes: neither set takes in the other's entries.
			checkCaps(t, "plugin services", plugin.Services, tt.wantPlugin, tt.notPlugin, true)
			checkCaps(t, "volume expansion", plugin.VolumeExpansion, tt.wantExpand, nil, true)
			ctrl, err := c.ControllerCapabilities(ctx)
			if err != nil {
				t.Fatal(err)
			}
			checkCaps(t, "controller capabilities", ctrl, tt.wantCtrl, tt.notCtrl, false)
			node, err := c.NodeCapabilities(ctx)
			if err != nil {
				t.Fatal(err)
			}
			checkCaps(t, "node capabilities", node, tt.wantNode, nil, true)
			group, err := c.GroupControllerCapabilities(ctx)
			if err != nil {
				t.Fatal(err)
			}
			checkCaps(t, "group controller capabilities", group, tt.wantGroup, nil, true)
		})
	}
}

// checkCaps reports the capabilities of want that got lacks and those of not it has; exact also reports any it
// has beyond want.
func checkCaps[T comparable](t *testing.T, what string, got Set[T], want, not []T, exact bool) {
	t.Helper()
	for _, c := range want {
		if !got.Has(c) {
			t.Errorf("%s lack %v", what, c)
		}
	}
	for _, c := range not {
		if got.Has(c) {
			t.Errorf("%s have unannounced %v", what, c)
		}
	}
	if exact && len(got) != len(want) {
		t.Errorf("%s %v, want exactly %v", what, got, want)
	}
}

func TestEmptyDriverNameIsAnError(t *testing.T) {
	c, _ := connect(t, testutil.StartFakeCSIDriver(t, &testutil.FakeCSIDriver{}), nil)
	if _, err := c.DriverName(context.Background()); err == nil || !strings.Contains(err.Error(), "empty name") {
		t.Fatalf("DriverName() error = %v, want empty name error", err)
	}
}

func TestProbeUntilReady(t *testing.T) {
	tests := []struct {
		name       string
		driver     *testutil.FakeCSIDriver
		ctxTimeout time.Duration
		wantErr    string
		wantProbes int
	}{
		{name: "ready at once", driver: &testutil.FakeCSIDriver{Name: "d"}, wantProbes: 1},
		{name: "ready after one not-ready answer", driver: &testutil.FakeCSIDriver{Name: "d", NotReadyProbes: 1}, wantProbes: 2},
		{name: "unavailable is retried until ctx ends", driver: &testutil.FakeCSIDriver{Name: "d", ProbeErr: status.Error(codes.Unavailable, "starting")},
			ctxTimeout: 1500 * time.Millisecond, wantErr: "waiting for the CSI driver"},
		{name: "other errors are final", driver: &testutil.FakeCSIDriver{Name: "d", ProbeErr: status.Error(codes.FailedPrecondition, "broken")},
			wantErr: "FailedPrecondition", wantProbes: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := testutil.StartFakeCSIDriver(t, tt.driver)
			c, _ := connect(t, d, nil)
			ctx := context.Background()
			if tt.ctxTimeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tt.ctxTimeout)
				defer cancel()
			}
			err := c.ProbeUntilReady(ctx)
			if tt.wantErr == "" && err != nil {
				t.Fatalf("ProbeUntilReady: %v", err)
			}
			if tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("ProbeUntilReady() = %v, want error containing %q", err, tt.wantErr)
			}
			if tt.wantProbes > 0 && d.ProbeCount() != tt.wantProbes {
				t.Errorf("%d probes, want %d", d.ProbeCount(), tt.wantProbes)
			}
		})
	}
}

func TestCallsAreRecordedInMetrics(t *testing.T) {
	reg := metrics.NewRegistry()
	m := csimetrics.NewCSIMetricsManagerWithOptions("", csimetrics.WithCustomRegistry(reg.Kube()), csimetrics.WithProcessStartTime(false))
	c, _ := connect(t, testutil.StartFakeCSIDriver(t, &testutil.FakeCSIDriver{Name: "hostpath.csi.k8s.io"}), m)
	name, err := c.DriverName(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	m.SetDriverName(name)
	if _, err := c.ControllerCapabilities(context.Background()); err != nil {
		t.Fatal(err)
	}
	families, err := reg.Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]string{}
	for _, f := range families {
		if f.GetName() != "csi_sidecar_operations_seconds" {
			continue
		}
		for _, metric := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range metric.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			seen[labels["method_name"]] = labels["driver_name"] + " " + labels["grpc_status_code"]
		}
	}
	want := map[string]string{
		"/csi.v1.Identity/GetPluginInfo":               "unknown-driver OK",
		"/csi.v1.Controller/ControllerGetCapabilities": "hostpath.csi.k8s.io OK",
	}
	for method, w := range want {
		if seen[method] != w {
			t.Errorf("csi_sidecar_operations_seconds for %s = %q, want %q (all: %v)", method, seen[method], w, seen)
		}
	}
}

func TestConnectionLossCallsHook(t *testing.T) {
	d := testutil.StartFakeCSIDriver(t, &testutil.FakeCSIDriver{Name: "d"})
	c, lost := connect(t, d, nil)
	if _, err := c.DriverName(context.Background()); err != nil {
		t.Fatal(err)
	}
	d.Stop()
	// gRPC redials lazily; a call makes it notice the loss.
	testutil.Eventually(t, 30*time.Second, "the connection-loss hook", func() (bool, error) {
		if _, err := c.DriverName(context.Background()); err == nil {
			t.Fatal("call succeeded after the driver stopped")
		}
		select {
		case <-lost:
			return true, nil
		default:
			return false, nil
		}
	})
}

func TestConnectRejectsZeroTimeout(t *testing.T) {
	if _, err := Connect(context.Background(), Options{Address: "/nonexistent"}); err == nil {
		t.Fatal("Connect with zero timeout succeeded")
	}
}
