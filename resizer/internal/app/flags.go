// Package app is the resizer proper, run by shared/sidecar once the driver is ready and this replica leads:
// it picks the resizer (CSI or trivial) from the driver's capabilities, decides whether claims are modified,
// and runs the controller.
package app

import (
	"errors"
	"flag"
	"fmt"
	"time"

	"k8s.io/component-base/featuregate"

	"github.com/stowage-csi/stowage/shared/flags"
)

// Upstream's defaults for the resizer's flags, and its lease name prefix.
const (
	Binary         = "csi-resizer"
	LockPrefix     = "external-resizer-"
	DefaultTimeout = 10 * time.Second
	DefaultWorkers = 10
	DefaultResync  = 10 * time.Minute
)

// The gates upstream's resizer registers besides the common ones.
const (
	RecoverVolumeExpansionFailure featuregate.Feature = "RecoverVolumeExpansionFailure"
	VolumeAttributesClass         featuregate.Feature = "VolumeAttributesClass"
	AnnotateFsResize              featuregate.Feature = "AnnotateFsResize"
)

// Defaults are the standard flags' per-sidecar defaults and the resizer's gates.
var Defaults = flags.Defaults{Timeout: DefaultTimeout, WorkerThreads: DefaultWorkers, Gates: []flags.Gate{
	{Name: RecoverVolumeExpansionFailure, Spec: featuregate.FeatureSpec{Default: true, PreRelease: featuregate.GA},
		NoEffect: "Stowage always runs the recovery state machine over status.allocatedResources, which the API server (1.34+) always serves"},
	{Name: VolumeAttributesClass, Spec: featuregate.FeatureSpec{Default: true, PreRelease: featuregate.GA}},
	{Name: AnnotateFsResize, Spec: featuregate.FeatureSpec{Default: true, PreRelease: featuregate.Beta}},
}}

// EventSource is the source component of the resizer's Events, upstream's "external-resizer <driver>".
func EventSource(driver string) string { return "external-resizer " + driver }

// Config holds the resizer's own flags (the standard ones are in sidecar.Env.Flags).
type Config struct {
	Master                 string
	Resync                 time.Duration
	HandleVolumeInUseError bool
	ExtraModifyMetadata    bool
}

// AddFlags registers the resizer's own flags with upstream's names and defaults. --workers is upstream's
// name for the standard --worker-threads; both set the same value.
func (c *Config) AddFlags(fs *flag.FlagSet, common *flags.Common) {
	fs.StringVar(&c.Master, "master", "", "Master URL to build a client config from. Either this or kubeconfig needs to be set if the resizer is being run out of cluster.")
	fs.DurationVar(&c.Resync, "resync-period", DefaultResync, "Resync period for cache")
	fs.IntVar(&common.WorkerThreads, "workers", DefaultWorkers, "Concurrency to process multiple resize requests")
	fs.BoolVar(&c.HandleVolumeInUseError, "handle-volume-inuse-error", true, "Flag to turn on/off capability to handle volume in use error in resizer controller. Defaults to true if not set. Stowage then caches only the Pods' claim names and phases.")
	fs.BoolVar(&c.ExtraModifyMetadata, "extra-modify-metadata", false, "If set, add pv/pvc metadata to plugin modify requests as parameters.")
}

// Validate checks the resizer's own flags and environment.
func (c *Config) Validate() error {
	var errs []error
	if c.Resync < 0 {
		errs = append(errs, fmt.Errorf("--resync-period must not be negative, got %s", c.Resync))
	}
	// Read again when the API server turns out to lack VolumeAttributesClasses; a value that is no boolean
	// fails start-up here, on every cluster, rather than only on the clusters where it is needed.
	if _, err := vacFallback(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
