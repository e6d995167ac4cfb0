package app

import (
	"context"
	"flag"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"

	"github.com/stowage-csi/stowage/attacher/internal/handler"
	"github.com/stowage-csi/stowage/shared/csiconn"
	"github.com/stowage-csi/stowage/shared/flags"
	"github.com/stowage-csi/stowage/shared/testutil"
)

func TestDriverCapabilitiesChooseTheHandler(t *testing.T) {
	ctrl := csi.PluginCapability_Service_CONTROLLER_SERVICE
	tests := []struct {
		name          string
		services      []csi.PluginCapability_Service_Type
		caps          []csi.ControllerServiceCapability_RPC_Type
		wantPublishes bool
		wantCaps      handler.Capabilities
	}{
		{name: "no controller service: trivial handler", caps: []csi.ControllerServiceCapability_RPC_Type{csi.ControllerServiceCapability_RPC_PUBLISH_UNPUBLISH_VOLUME}},
		{name: "controller without ControllerPublish: trivial handler", services: []csi.PluginCapability_Service_Type{ctrl},
			caps: []csi.ControllerServiceCapability_RPC_Type{csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME}},
		{name: "ControllerPublish only", services: []csi.PluginCapability_Service_Type{ctrl},
			caps: []csi.ControllerServiceCapability_RPC_Type{csi.ControllerServiceCapability_RPC_PUBLISH_UNPUBLISH_VOLUME}, wantPublishes: true},
		{name: "every capability the attacher uses", services: []csi.PluginCapability_Service_Type{ctrl},
			caps: []csi.ControllerServiceCapability_RPC_Type{
				csi.ControllerServiceCapability_RPC_PUBLISH_UNPUBLISH_VOLUME, csi.ControllerServiceCapability_RPC_PUBLISH_READONLY,
				csi.ControllerServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER, csi.ControllerServiceCapability_RPC_LIST_VOLUMES,
				csi.ControllerServiceCapability_RPC_LIST_VOLUMES_PUBLISHED_NODES,
			},
			wantPublishes: true,
			wantCaps:      handler.Capabilities{PublishReadOnly: true, SingleNodeMultiWriter: true, ListPublishedNodes: true}},
		{name: "LIST_VOLUMES without published nodes: no reconcile", services: []csi.PluginCapability_Service_Type{ctrl},
			caps: []csi.ControllerServiceCapability_RPC_Type{
				csi.ControllerServiceCapability_RPC_PUBLISH_UNPUBLISH_VOLUME, csi.ControllerServiceCapability_RPC_LIST_VOLUMES,
			},
			wantPublishes: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			drv := testutil.StartFakeCSIDriver(t, &testutil.FakeCSIDriver{Name: "d", PluginServices: tc.services, ControllerCaps: tc.caps})
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			conn, err := csiconn.Connect(ctx, csiconn.Options{Address: drv.Address, Timeout: time.Second, OnConnectionLoss: func(context.Context) bool { return false }})
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = conn.Close() }()
			publishes, caps, err := driverCapabilities(ctx, conn)
			if err != nil {
				t.Fatal(err)
			}
			if publishes != tc.wantPublishes || caps != tc.wantCaps {
				t.Errorf("driverCapabilities = %v, %+v; want %v, %+v", publishes, caps, tc.wantPublishes, tc.wantCaps)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		mutate  func(*Config)
		wantErr bool
	}{
		{name: "defaults are valid"},
		{name: "negative max-entries", mutate: func(c *Config) { c.MaxEntries = -1 }, wantErr: true},
		{name: "negative reconcile-sync", mutate: func(c *Config) { c.ReconcileSync = -time.Second }, wantErr: true},
		{name: "zero worker threads from the shared flags", args: []string{"--worker-threads=0"}, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fs := flag.NewFlagSet("test", flag.ContinueOnError)
			common, err := flags.Register(fs, flags.Defaults{Timeout: DefaultTimeout, WorkerThreads: DefaultWorkerThreads})
			if err != nil {
				t.Fatal(err)
			}
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			cfg := Config{Common: common, Resync: DefaultResync, ReconcileSync: DefaultReconcileSync}
			if tc.mutate != nil {
				tc.mutate(&cfg)
			}
			if err := cfg.Validate(); (err != nil) != tc.wantErr {
				t.Errorf("Validate = %v, want error %v", err, tc.wantErr)
			}
		})
	}
}
