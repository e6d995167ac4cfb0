package app

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/stowage-csi/stowage/shared/csiconn"
	"github.com/stowage-csi/stowage/shared/httpserver"
	"github.com/stowage-csi/stowage/shared/kubeclient"
	"github.com/stowage-csi/stowage/shared/sidecar"
)

// serving returns a diagnostics server on a free loopback port that stops when t ends.
func serving(t *testing.T) *httpserver.Server {
	t.Helper()
	srv, err := httpserver.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ctx); err != nil {
			t.Errorf("serving: %v", err)
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return srv
}

func driverEnv(t *testing.T, services []csi.PluginCapability_Service_Type, rpcs ...csi.ControllerServiceCapability_RPC_Type) *sidecar.Env {
	t.Helper()
	env := &sidecar.Env{
		DriverName:     "hostpath.csi.k8s.io",
		Clients:        &kubeclient.Clients{Kube: fake.NewClientset()},
		PluginCaps:     csiconn.PluginCapabilities{Services: csiconn.Set[csi.PluginCapability_Service_Type]{}},
		ControllerCaps: csiconn.ControllerCapabilities{},
		HTTP:           serving(t),
	}
	for _, s := range services {
		env.PluginCaps.Services[s] = struct{}{}
	}
	for _, r := range rpcs {
		env.ControllerCaps[r] = struct{}{}
	}
	return env
}

// Prepare runs on standbys as well as on the leader (sidecar.Options.Prepare), so these refusals end start-up on
// every replica before it joins the election.
func TestPrepareRefusesDriversItCannotProvisionFor(t *testing.T) {
	controller := []csi.PluginCapability_Service_Type{csi.PluginCapability_Service_CONTROLLER_SERVICE}
	createDelete := csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME
	tests := []struct {
		name     string
		args     []string
		nodeName string
		services []csi.PluginCapability_Service_Type
		rpcs     []csi.ControllerServiceCapability_RPC_Type
		wantErr  string
	}{
		{name: "provisioning driver", services: controller, rpcs: []csi.ControllerServiceCapability_RPC_Type{createDelete}},
		{name: "no controller service", wantErr: "no controller service"},
		{name: "no CREATE_DELETE_VOLUME", services: controller,
			rpcs: []csi.ControllerServiceCapability_RPC_Type{csi.ControllerServiceCapability_RPC_PUBLISH_UNPUBLISH_VOLUME}, wantErr: "CREATE_DELETE_VOLUME"},
		{name: "node deployment without NODE_NAME", args: []string{"--node-deployment"}, services: controller,
			rpcs: []csi.ControllerServiceCapability_RPC_Type{createDelete}, wantErr: "NODE_NAME"},
		{name: "node deployment", args: []string{"--node-deployment"}, nodeName: "node-1", services: controller,
			rpcs: []csi.ControllerServiceCapability_RPC_Type{createDelete}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("NODE_NAME", tt.nodeName)
			cfg := parsed(t, tt.args...)
			env := driverEnv(t, tt.services, tt.rpcs...)
			err := cfg.Prepare(context.Background(), env)
			if tt.wantErr == "" && err != nil {
				t.Fatalf("Prepare: %v", err)
			}
			if tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("Prepare() = %v, want an error containing %q", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			d, err := cfg.leaderDeps(env)
			if err != nil {
				t.Fatal(err)
			}
			if d.nodeName != tt.nodeName || d.driver != "hostpath.csi.k8s.io" {
				t.Errorf("leader gets node %q, driver %q", d.nodeName, d.driver)
			}
		})
	}
}

func TestPrepareServesPprofOnlyWhenEnabled(t *testing.T) {
	for _, enabled := range []bool{false, true} {
		args := []string{}
		if enabled {
			args = append(args, "--enable-pprof")
		}
		cfg := parsed(t, args...)
		env := driverEnv(t, []csi.PluginCapability_Service_Type{csi.PluginCapability_Service_CONTROLLER_SERVICE},
			csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME)
		if err := cfg.Prepare(context.Background(), env); err != nil {
			t.Fatal(err)
		}
		resp, err := http.Get(env.HTTP.URL("/debug/pprof/cmdline"))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if got := resp.StatusCode == http.StatusOK && len(body) > 0; got != enabled {
			t.Errorf("--enable-pprof=%v: /debug/pprof/cmdline answered %d %q", enabled, resp.StatusCode, body)
		}
	}
}

// parsed returns the provisioner's flags after parsing args with the flag set sidecar.Run uses.
func parsed(t *testing.T, args ...string) *Config {
	t.Helper()
	cfg := &Config{}
	fs, _, err := sidecar.NewFlagSet(cfg.Options(args))
	if err != nil {
		t.Fatal(err)
	}
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return cfg
}
