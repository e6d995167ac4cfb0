// Package app is the provisioner proper, started by shared/sidecar: its flags, the checks every replica makes
// before the leader election (Prepare), and the informers, queues and controllers the leader runs.
package app

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"k8s.io/component-base/featuregate"

	"github.com/stowage-csi/stowage/shared/flags"
	"github.com/stowage-csi/stowage/shared/sidecar"
)

// Upstream's binary name and its --timeout and --worker-threads defaults. The Lease is named for the driver
// alone (no prefix), as upstream's provisioner names it.
const (
	Binary     = "csi-provisioner"
	LockPrefix = ""
)

// The feature gates upstream's provisioner registers besides the common ones (shared/flags adds
// ReleaseLeaderElectionOnExit and the logging gates).
const (
	Topology                       featuregate.Feature = "Topology"
	CrossNamespaceVolumeDataSource featuregate.Feature = "CrossNamespaceVolumeDataSource"
	VolumeAttributesClass          featuregate.Feature = "VolumeAttributesClass"
)

// Defaults are the standard flags' provisioner defaults and its feature gates, with upstream's defaults.
var Defaults = flags.Defaults{Timeout: 10 * time.Second, WorkerThreads: 100, Gates: []flags.Gate{
	// Accepted, not read: upstream's manifest passes Topology=true, and Stowage always sends topology when the
	// driver has VOLUME_ACCESSIBILITY_CONSTRAINTS.
	{Name: Topology, Spec: featuregate.FeatureSpec{Default: true, PreRelease: featuregate.GA},
		NoEffect: "Stowage always uses topology when the driver has the VOLUME_ACCESSIBILITY_CONSTRAINTS capability"},
	// Accepted so a manifest that sets it starts; Stowage has no cross-namespace data sources (ReferenceGrant).
	{Name: CrossNamespaceVolumeDataSource, Spec: featuregate.FeatureSpec{Default: false, PreRelease: featuregate.Alpha},
		NoEffect: "Stowage does not provision from a data source in another namespace"},
	// Honoured: off, the provisioner never reads VolumeAttributesClasses (no informer, no RBAC needed for them);
	// it is turned off at start-up when the API server does not serve the v1 API, as upstream turns it off.
	{Name: VolumeAttributesClass, Spec: featuregate.FeatureSpec{Default: true, PreRelease: featuregate.GA}},
}}

// Config holds the provisioner's own flags (the standard ones are in sidecar.Env.Flags).
type Config struct {
	Master                         string
	VolumeNamePrefix               string
	VolumeNameUUIDLength           int
	CloningProtectionThreads       int
	StrictTopology                 bool
	ImmediateTopology              bool
	ExtraCreateMetadata            bool
	DefaultFSType                  string
	ControllerPublishReadOnly      bool
	PreventVolumeModeConversion    bool
	EnablePprof                    bool
	EnableCapacity                 bool
	CapacityThreads                int
	CapacityPollInterval           time.Duration
	CapacityForImmediateBinding    bool
	CapacityOwnerrefLevel          int
	KubeAPICapacityQPS             float64
	KubeAPICapacityBurst           int
	NodeDeployment                 bool
	NodeDeploymentImmediateBinding bool
}

// Options are what main passes to sidecar.Run: upstream's flags and defaults, --master for the clients, the
// driver checks and pprof on every replica (Prepare), the "migrated" label on CSI call metrics, and upstream's
// Event source.
func (c *Config) Options(args []string) sidecar.Options {
	return sidecar.Options{
		Binary:       Binary,
		Defaults:     Defaults,
		LockPrefix:   LockPrefix,
		Args:         args,
		AddFlags:     c.AddFlags,
		Validate:     c.Validate,
		Master:       func() string { return c.Master },
		Prepare:      c.Prepare,
		Migration:    true,
		CountScrapes: true,
		// Upstream's flags that are accepted, so that an upstream Deployment starts, but not acted on: Run warns
		// about each one the command line sets.
		NoEffect: map[string]string{
			"snapshot-orphan-sweep-interval": "Stowage releases a snapshot's source finalizer when the claim that uses it finishes, so no sweep runs",
			"node-deployment-base-delay":     "Stowage resolves the race for an immediate claim between node replicas with one preconditioned patch instead of delays",
			"node-deployment-max-delay":      "Stowage resolves the race for an immediate claim between node replicas with one preconditioned patch instead of delays",
		},
		// Events get a client (and rate limiter) of their own with the same limits, so a burst of Events never
		// delays the writes that provision volumes, and the reverse.
		EventSource:     EventSource,
		EventsOwnClient: true,
	}
}

// EventSource is upstream's Event source for the provisioner, "<driver>_<hostname>", rather than the binary
// name; a "_" in the host name becomes "-", so the first "_" after the driver name is the separator.
func EventSource(driver string) string {
	host, _ := os.Hostname()
	return driver + "_" + strings.ReplaceAll(host, "_", "-")
}

// AddFlags registers the provisioner's own flags with upstream's names and defaults.
func (c *Config) AddFlags(fs *flag.FlagSet, _ *flags.Common) {
	fs.StringVar(&c.Master, "master", "", "Master URL to build a client config from. Either this or kubeconfig needs to be set if the provisioner is being run out of cluster.")
	fs.StringVar(&c.VolumeNamePrefix, "volume-name-prefix", "pvc", "Prefix to apply to the name of a created volume.")
	fs.IntVar(&c.VolumeNameUUIDLength, "volume-name-uuid-length", -1, "Truncates generated UUID of a created volume to this length. Defaults behavior is to NOT truncate.")
	fs.IntVar(&c.CloningProtectionThreads, "cloning-protection-threads", 1, "Number of simultaneously running threads, handling cloning finalizer removal.")
	fs.Duration("snapshot-orphan-sweep-interval", 5*time.Minute, "Accepted for compatibility, no effect: Stowage releases the snapshot source finalizer when the claim finishes, so no sweep runs.")
	fs.BoolVar(&c.StrictTopology, "strict-topology", false, "Late binding: pass only the selected node's topology to CreateVolume.")
	fs.BoolVar(&c.ImmediateTopology, "immediate-topology", true, "Immediate binding: pass aggregated cluster topologies for all nodes where the CSI driver is available to CreateVolume.")
	fs.BoolVar(&c.ExtraCreateMetadata, "extra-create-metadata", false, "If set, add pv/pvc metadata to plugin create requests as parameters.")
	fs.StringVar(&c.DefaultFSType, "default-fstype", "", "The default filesystem type of the volume to provision when fstype is unspecified in the StorageClass.")
	fs.BoolVar(&c.ControllerPublishReadOnly, "controller-publish-readonly", false, "Mark PVs readonly at ControllerPublishVolume when the PVC access mode is ReadOnlyMany.")
	fs.BoolVar(&c.PreventVolumeModeConversion, "prevent-volume-mode-conversion", true, "Prevent an unauthorised user from changing the volume mode when restoring from a snapshot.")
	fs.BoolVar(&c.EnablePprof, "enable-pprof", false, "Serve /debug/pprof/ on the HTTP server.")
	fs.BoolVar(&c.EnableCapacity, "enable-capacity", false, "Publish CSIStorageCapacity objects with GetCapacity results.")
	fs.IntVar(&c.CapacityThreads, "capacity-threads", 1, "Number of simultaneously running threads, handling CSIStorageCapacity objects.")
	fs.DurationVar(&c.CapacityPollInterval, "capacity-poll-interval", time.Minute, "How long the provisioner waits before checking for storage capacity changes.")
	fs.BoolVar(&c.CapacityForImmediateBinding, "capacity-for-immediate-binding", false, "Enables producing capacity information for storage classes with immediate binding.")
	fs.IntVar(&c.CapacityOwnerrefLevel, "capacity-ownerref-level", 1, "The level indicates the number of objects that need to be traversed starting from the pod identified by the POD_NAME and NAMESPACE environment variables to reach the owning object for CSIStorageCapacity objects: -1 for no owner, 0 for the pod itself, 1 for a StatefulSet or DaemonSet, 2 for a Deployment.")
	fs.Float64Var(&c.KubeAPICapacityQPS, "kube-api-capacity-qps", 1, "QPS to use for storage capacity updates while communicating with the Kubernetes API server.")
	fs.IntVar(&c.KubeAPICapacityBurst, "kube-api-capacity-burst", 5, "Burst to use for storage capacity updates while communicating with the Kubernetes API server.")
	fs.BoolVar(&c.NodeDeployment, "node-deployment", false, "Enables deploying the external-provisioner together with a CSI driver on nodes to manage node-local volumes (needs NODE_NAME).")
	fs.BoolVar(&c.NodeDeploymentImmediateBinding, "node-deployment-immediate-binding", true, "Determines whether immediate binding is supported when deployed on each node.")
	fs.Duration("node-deployment-base-delay", 20*time.Second, "Accepted for compatibility, no effect: Stowage resolves the race for immediate claims with one preconditioned patch instead of delays.")
	fs.Duration("node-deployment-max-delay", 60*time.Second, "Accepted for compatibility, no effect (see --node-deployment-base-delay).")
}

// Validate checks the provisioner's own flags and the environment they need (sidecar.Run has checked the
// standard ones).
func (c *Config) Validate() error {
	if c.VolumeNamePrefix == "" {
		return fmt.Errorf("--volume-name-prefix must not be empty")
	}
	if c.CloningProtectionThreads < 1 || c.CapacityThreads < 1 {
		return fmt.Errorf("--cloning-protection-threads and --capacity-threads must be at least 1")
	}
	if c.EnableCapacity && c.CapacityPollInterval <= 0 {
		return fmt.Errorf("--capacity-poll-interval must be positive")
	}
	// The environment these flags read once this replica leads, checked at start-up (and in a validate-only
	// run) so that a Deployment without it fails on every replica at once.
	if c.NodeDeployment && os.Getenv("NODE_NAME") == "" {
		return fmt.Errorf("--node-deployment needs the NODE_NAME environment variable")
	}
	if c.EnableCapacity && os.Getenv("NAMESPACE") == "" {
		return fmt.Errorf("--enable-capacity needs the NAMESPACE environment variable")
	}
	if c.EnableCapacity && c.CapacityOwnerrefLevel >= 0 && os.Getenv("POD_NAME") == "" {
		return fmt.Errorf("--enable-capacity with --capacity-ownerref-level >= 0 needs the POD_NAME environment variable")
	}
	return nil
}
