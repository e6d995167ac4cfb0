package app

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/pprof"
	"os"

	"github.com/container-storage-interface/spec/lib/go/csi"
	snapclient "github.com/kubernetes-csi/external-snapshotter/client/v8/clientset/versioned"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/stowage-csi/stowage/provisioner/internal/provision"
	"github.com/stowage-csi/stowage/shared/csiconn"
	"github.com/stowage-csi/stowage/shared/sidecar"
)

// Prepare runs on every replica once the driver is ready, before the leader election, so a standby refuses a
// driver it could never provision for as quickly as the leader would: a driver without a controller service
// or CREATE_DELETE_VOLUME, or --node-deployment without NODE_NAME. It also serves /debug/pprof/ with
// --enable-pprof, on standbys too.
func (c *Config) Prepare(ctx context.Context, env *sidecar.Env) error {
	d, err := c.leaderDeps(env)
	if err != nil {
		return err
	}
	klog.FromContext(ctx).Info("Connected to the CSI driver", "capabilities", fmt.Sprintf("%+v", d.caps))
	if c.EnablePprof && env.HTTP != nil {
		env.HTTP.Handle("/debug/pprof/", http.HandlerFunc(pprof.Index))
		env.HTTP.Handle("/debug/pprof/cmdline", http.HandlerFunc(pprof.Cmdline))
		env.HTTP.Handle("/debug/pprof/profile", http.HandlerFunc(pprof.Profile))
		env.HTTP.Handle("/debug/pprof/symbol", http.HandlerFunc(pprof.Symbol))
		env.HTTP.Handle("/debug/pprof/trace", http.HandlerFunc(pprof.Trace))
	}
	return nil
}

// leaderDeps is what the controllers need from the environment sidecar.Run built.
type leaderDeps struct {
	env      *sidecar.Env
	kube     kubernetes.Interface
	snaps    snapclient.Interface
	driver   string
	caps     provision.Capabilities
	nodeName string
}

// leaderDeps derives the provisioner's view of the driver and node from env; Prepare has already checked
// them on this replica, Run reads them again rather than keep state between the two.
func (c *Config) leaderDeps(env *sidecar.Env) (leaderDeps, error) {
	caps, err := capabilities(env.PluginCaps, env.ControllerCaps)
	if err != nil {
		return leaderDeps{}, err
	}
	nodeName := ""
	if c.NodeDeployment {
		if nodeName = os.Getenv("NODE_NAME"); nodeName == "" {
			return leaderDeps{}, errors.New("--node-deployment needs the NODE_NAME environment variable")
		}
	}
	return leaderDeps{env: env, kube: env.Clients.Kube, driver: env.DriverName, caps: caps, nodeName: nodeName}, nil
}

// capabilities picks the driver capabilities the provisioner acts on from what sidecar.Run discovered. A driver
// without a controller service or CREATE_DELETE_VOLUME cannot be provisioned for, which upstream also treats as
// fatal.
func capabilities(plugin csiconn.PluginCapabilities, ctrl csiconn.ControllerCapabilities) (provision.Capabilities, error) {
	if !plugin.Has(csi.PluginCapability_Service_CONTROLLER_SERVICE) {
		return provision.Capabilities{}, errors.New("the CSI driver has no controller service")
	}
	if !ctrl.Has(csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME) {
		return provision.Capabilities{}, errors.New("the CSI driver lacks CREATE_DELETE_VOLUME")
	}
	return provision.Capabilities{
		Topology:              plugin.Has(csi.PluginCapability_Service_VOLUME_ACCESSIBILITY_CONSTRAINTS),
		Clone:                 ctrl.Has(csi.ControllerServiceCapability_RPC_CLONE_VOLUME),
		Snapshot:              ctrl.Has(csi.ControllerServiceCapability_RPC_CREATE_DELETE_SNAPSHOT),
		SingleNodeMultiWriter: ctrl.Has(csi.ControllerServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER),
		ModifyVolume:          ctrl.Has(csi.ControllerServiceCapability_RPC_MODIFY_VOLUME),
		GetCapacity:           ctrl.Has(csi.ControllerServiceCapability_RPC_GET_CAPACITY),
	}, nil
}
