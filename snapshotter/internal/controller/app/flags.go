package app

import (
	"flag"
	"fmt"
	"time"

	"k8s.io/component-base/featuregate"

	"github.com/stowage-csi/stowage/shared/flags"
)

// Binary and LockName are upstream's: the Lease is shared with upstream replicas during a rolling swap.
const (
	Binary   = "snapshot-controller"
	LockName = "snapshot-controller-leader"
)

// Upstream's gates (external-snapshotter pkg/features), besides the logging ones.
const (
	CSIVolumeGroupSnapshot featuregate.Feature = "CSIVolumeGroupSnapshot"
)

// Config is snapshot-controller's flag set: upstream's, name for name. The shared sidecar flags (with Stowage's
// --kube-api-qps and --kube-api-burst defaults) but those of a CSI sidecar, which upstream's snapshot-controller
// does not have, and its own.
type Config struct {
	*flags.Common

	ResyncPeriod                  time.Duration
	EnableDistributedSnapshotting bool
	PreventVolumeModeConversion   bool
	RetryCRDIntervalMax           time.Duration
}

// NewFlagSet registers the flags into a new flag set and returns it with the Config it fills.
func NewFlagSet() (*flag.FlagSet, *Config, error) {
	fs := flag.NewFlagSet(Binary, flag.ContinueOnError)
	common, err := flags.Register(fs, flags.Defaults{
		WorkerThreads: 10,
		Gates:         []flags.Gate{{Name: CSIVolumeGroupSnapshot, Spec: featuregate.FeatureSpec{Default: true, PreRelease: featuregate.GA}}},
		Without:       []string{"csi-address", "timeout", "metrics-address", "leader-election-labels"},
	})
	if err != nil {
		return nil, nil, err
	}
	c := &Config{Common: common}
	fs.DurationVar(&c.ResyncPeriod, "resync-period", 15*time.Minute, "Resync interval of the controller.")
	fs.BoolVar(&c.EnableDistributedSnapshotting, "enable-distributed-snapshotting", false, "Enables each node to handle snapshotting for the local volumes created on that node")
	fs.BoolVar(&c.PreventVolumeModeConversion, "prevent-volume-mode-conversion", true, "Prevents an unauthorised user from modifying the volume mode when creating a PVC from an existing VolumeSnapshot.")
	fs.DurationVar(&c.RetryCRDIntervalMax, "retry-crd-interval-max", 30*time.Second, "Maximum time to wait for CRDs to appear. The default is 30 seconds.")
	return fs, c, nil
}

// Validate checks the parsed values; each error names the flag.
func (c *Config) Validate() error {
	if err := c.Common.Validate(); err != nil {
		return err
	}
	if c.ResyncPeriod < 0 {
		return fmt.Errorf("invalid flags: --resync-period must not be negative, got %s", c.ResyncPeriod)
	}
	return nil
}
