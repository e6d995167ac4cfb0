package app

import (
	"errors"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"

	"github.com/stowage-csi/stowage/shared/csiconn"
)

// The resizer is chosen once from the capabilities: the CSI one with controller expansion, the trivial one
// for node-only expansion, none for a driver that only modifies volumes, and a driver that does neither is
// refused naming it.
func TestResizerKind(t *testing.T) {
	controller := csiconn.PluginCapabilities{Services: csiconn.Set[csi.PluginCapability_Service_Type]{csi.PluginCapability_Service_CONTROLLER_SERVICE: {}}}
	online := csiconn.PluginCapabilities{VolumeExpansion: csiconn.Set[csi.PluginCapability_VolumeExpansion_Type]{csi.PluginCapability_VolumeExpansion_ONLINE: {}}}
	expand := csiconn.ControllerCapabilities{csi.ControllerServiceCapability_RPC_EXPAND_VOLUME: {}}
	modify := csiconn.ControllerCapabilities{csi.ControllerServiceCapability_RPC_MODIFY_VOLUME: {}}
	nodeExpand := func() (csiconn.NodeCapabilities, error) {
		return csiconn.NodeCapabilities{csi.NodeServiceCapability_RPC_EXPAND_VOLUME: {}}, nil
	}
	noNode := func() (csiconn.NodeCapabilities, error) { return nil, errors.New("unimplemented") }
	tests := []struct {
		name       string
		plugin     csiconn.PluginCapabilities
		ctrl       csiconn.ControllerCapabilities
		node       func() (csiconn.NodeCapabilities, error)
		want       expansion
		wantErrMsg string
	}{
		{name: "controller EXPAND_VOLUME: CSI resizer", plugin: controller, ctrl: expand, node: noNode, want: expandInController},
		{name: "EXPAND_VOLUME without the controller service: trivial", ctrl: expand, node: nodeExpand, want: expandOnNode},
		{name: "VolumeExpansion plugin capability only: trivial", plugin: online, node: noNode, want: expandOnNode},
		{name: "node EXPAND_VOLUME only: trivial", plugin: controller, node: nodeExpand, want: expandOnNode},
		{name: "MODIFY_VOLUME without expansion: modify only", plugin: controller, ctrl: modify, node: noNode, want: expandNever},
		{name: "MODIFY_VOLUME without the controller service: refused", ctrl: modify, node: noNode, wantErrMsg: "nor ControllerModifyVolume"},
		{name: "no expansion at all: refused", plugin: controller, node: noNode, wantErrMsg: "csi.example.com supports neither"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := resizerKind("csi.example.com", tc.plugin, tc.ctrl, tc.node)
			if tc.wantErrMsg != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErrMsg) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErrMsg)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("resizerKind = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

func TestVACFallbackParsesTheEnvironment(t *testing.T) {
	for v, want := range map[string]bool{"": false, "true": true, "false": false, "1": true} {
		t.Setenv(vacFallbackEnv, v)
		if got, err := vacFallback(); err != nil || got != want {
			t.Errorf("%s=%q: %v, %v; want %v", vacFallbackEnv, v, got, err, want)
		}
	}
	t.Setenv(vacFallbackEnv, "yes please")
	if _, err := vacFallback(); err == nil || !strings.Contains(err.Error(), vacFallbackEnv) {
		t.Errorf("bad value: err = %v, want one naming %s", err, vacFallbackEnv)
	}
	// Start-up, and a validate-only run, refuse it before the API server is asked for VolumeAttributesClasses.
	var cfg Config
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), vacFallbackEnv) {
		t.Errorf("Validate with a bad value: %v, want an error naming %s", err, vacFallbackEnv)
	}
	t.Setenv(vacFallbackEnv, "true")
	if err := cfg.Validate(); err != nil {
		t.Errorf("Validate with %s=true: %v", vacFallbackEnv, err)
	}
}

func TestEventSourceIsUpstreams(t *testing.T) {
	if got := EventSource("ebs.csi.aws.com"); got != "external-resizer ebs.csi.aws.com" {
		t.Errorf("EventSource = %q, want upstream's \"external-resizer ebs.csi.aws.com\"", got)
	}
}
