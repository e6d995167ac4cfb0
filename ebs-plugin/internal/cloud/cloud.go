// Package cloud is the driver's EC2 layer: every EC2 call the controller makes, the waits that follow them,
// batching of Describe calls, per-API adaptive retries and request metrics. It speaks to EC2 (or an emulator
// at AWS_EC2_ENDPOINT) through aws-sdk-go-v2 only.
package cloud

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"k8s.io/utils/clock"

	"github.com/stowage-csi/stowage/ebs-plugin/internal/batcher"
	"github.com/stowage-csi/stowage/ebs-plugin/internal/devicemanager"
	"github.com/stowage-csi/stowage/ebs-plugin/internal/metrics"
)

// Config configures the EC2 layer.
type Config struct {
	Region string
	// Endpoint overrides the EC2 endpoint (AWS_EC2_ENDPOINT).
	Endpoint string
	// Batching merges concurrent Describe calls (--batching).
	Batching  bool
	UserAgent string
	Metrics   *metrics.Recorder
	// DebugLog logs every EC2 request and response through klog (--aws-sdk-debug-log).
	DebugLog bool
	// Waits; zero values take upstream's.
	Waits Waits
	// Clock times the batches' delay; nil means the real clock.
	Clock clock.WithDelayedExecution
}

// Waits are the polling schedules after mutating calls.
type Waits struct {
	CreateInitialDelay time.Duration
	Create             Backoff
	Attach             Backoff
	Modify             Backoff
	// AttachingTimeout is how long an attachment may sit in "attaching" before the driver gives up on it.
	AttachingTimeout time.Duration
	// BatchDelay is how long a batch waits for more keys.
	BatchDelay time.Duration
}

// DefaultWaits are upstream's schedules.
func DefaultWaits() Waits {
	return Waits{
		CreateInitialDelay: 1250 * time.Millisecond,
		Create:             Backoff{Initial: 500 * time.Millisecond, Factor: 1.5, Steps: 11},
		Attach:             Backoff{Initial: time.Second, Factor: 1.8, Steps: 13},
		Modify:             Backoff{Initial: time.Second, Factor: 1.7, Steps: 10},
		AttachingTimeout:   90 * time.Second,
		BatchDelay:         500 * time.Millisecond,
	}
}

// ec2API is the subset of EC2 this package calls.
type ec2API interface {
	CreateVolume(context.Context, *ec2.CreateVolumeInput, ...func(*ec2.Options)) (*ec2.CreateVolumeOutput, error)
	CopyVolumes(context.Context, *ec2.CopyVolumesInput, ...func(*ec2.Options)) (*ec2.CopyVolumesOutput, error)
	DeleteVolume(context.Context, *ec2.DeleteVolumeInput, ...func(*ec2.Options)) (*ec2.DeleteVolumeOutput, error)
	DescribeVolumes(context.Context, *ec2.DescribeVolumesInput, ...func(*ec2.Options)) (*ec2.DescribeVolumesOutput, error)
	AttachVolume(context.Context, *ec2.AttachVolumeInput, ...func(*ec2.Options)) (*ec2.AttachVolumeOutput, error)
	DetachVolume(context.Context, *ec2.DetachVolumeInput, ...func(*ec2.Options)) (*ec2.DetachVolumeOutput, error)
	DescribeInstances(context.Context, *ec2.DescribeInstancesInput, ...func(*ec2.Options)) (*ec2.DescribeInstancesOutput, error)
	ModifyVolume(context.Context, *ec2.ModifyVolumeInput, ...func(*ec2.Options)) (*ec2.ModifyVolumeOutput, error)
	DescribeVolumesModifications(context.Context, *ec2.DescribeVolumesModificationsInput, ...func(*ec2.Options)) (*ec2.DescribeVolumesModificationsOutput, error)
	CreateTags(context.Context, *ec2.CreateTagsInput, ...func(*ec2.Options)) (*ec2.CreateTagsOutput, error)
	DeleteTags(context.Context, *ec2.DeleteTagsInput, ...func(*ec2.Options)) (*ec2.DeleteTagsOutput, error)
	CreateSnapshot(context.Context, *ec2.CreateSnapshotInput, ...func(*ec2.Options)) (*ec2.CreateSnapshotOutput, error)
	DeleteSnapshot(context.Context, *ec2.DeleteSnapshotInput, ...func(*ec2.Options)) (*ec2.DeleteSnapshotOutput, error)
	DescribeSnapshots(context.Context, *ec2.DescribeSnapshotsInput, ...func(*ec2.Options)) (*ec2.DescribeSnapshotsOutput, error)
	LockSnapshot(context.Context, *ec2.LockSnapshotInput, ...func(*ec2.Options)) (*ec2.LockSnapshotOutput, error)
	EnableFastSnapshotRestores(context.Context, *ec2.EnableFastSnapshotRestoresInput, ...func(*ec2.Options)) (*ec2.EnableFastSnapshotRestoresOutput, error)
	DescribeAvailabilityZones(context.Context, *ec2.DescribeAvailabilityZonesInput, ...func(*ec2.Options)) (*ec2.DescribeAvailabilityZonesOutput, error)
	DescribeVolumeStatus(context.Context, *ec2.DescribeVolumeStatusInput, ...func(*ec2.Options)) (*ec2.DescribeVolumeStatusOutput, error)
}

// Cloud performs the driver's EC2 operations.
type Cloud struct {
	ec2      ec2API
	waits    Waits
	retryers *retryers
	devices  *devicemanager.Manager
	now      func() time.Time
	// detaches tracks detaches EC2 accepted that have not finished (nil: not tracked).
	detaches *metrics.DetachTracker

	volumes       describer[string, types.Volume]
	instances     describer[string, types.Instance]
	snapshotsByID describer[string, types.Snapshot]
	snapshotsByNm describer[string, types.Snapshot]
	modifications describer[string, types.VolumeModification]

	zonesFetch   sync.Mutex
	mu           sync.Mutex
	tokenBumps   map[string]bump     // CSI name -> current ClientToken suffix
	maxIOPSCache map[string]maxEntry // type/zone/outpost -> discovered maximum
	zones        []string
	zonesExpiry  time.Time
	// reachableUntil is when the last successful CheckReachable stops counting.
	reachableUntil time.Time
}

type bump struct {
	n       int
	expires time.Time
}

type maxEntry struct {
	iops    int32
	expires time.Time
}

// New builds the EC2 client from the standard credential chain and returns a Cloud.
func New(ctx context.Context, cfg Config) (*Cloud, error) {
	opts := []func(*config.LoadOptions) error{config.WithRetryMaxAttempts(50)}
	if cfg.Region != "" {
		opts = append(opts, config.WithRegion(cfg.Region))
	}
	if cfg.UserAgent != "" {
		opts = append(opts, config.WithAppID(cfg.UserAgent))
	}
	awsCfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("load AWS configuration: %w", err)
	}
	if awsCfg.Region == "" {
		return nil, fmt.Errorf("no AWS region: set AWS_REGION or run where instance metadata is reachable")
	}
	endpoint := cfg.Endpoint
	if endpoint == "" {
		endpoint = os.Getenv("AWS_EC2_ENDPOINT")
	}
	client := ec2.NewFromConfig(awsCfg, func(o *ec2.Options) {
		if endpoint != "" {
			o.BaseEndpoint = aws.String(endpoint)
		}
		o.APIOptions = append(o.APIOptions, metricsMiddleware(cfg.Metrics))
		if cfg.DebugLog {
			sdkDebugLogging(o)
		}
	})
	return newCloud(client, cfg), nil
}

func newCloud(api ec2API, cfg Config) *Cloud {
	w := cfg.Waits
	if w == (Waits{}) {
		w = DefaultWaits()
	}
	c := &Cloud{
		ec2:          api,
		waits:        w,
		retryers:     newRetryers(),
		devices:      devicemanager.New(),
		now:          time.Now,
		detaches:     cfg.Metrics.Detaches(),
		tokenBumps:   map[string]bump{},
		maxIOPSCache: map[string]maxEntry{},
	}
	c.volumes = newDescriber(cfg.Batching, 500, w.BatchDelay, cfg.Clock, c.describeVolumesByID)
	c.instances = newDescriber(cfg.Batching, 50, w.BatchDelay, cfg.Clock, c.describeInstancesByID)
	c.snapshotsByID = newDescriber(cfg.Batching, 1000, w.BatchDelay, cfg.Clock, c.describeSnapshotsByID)
	c.snapshotsByNm = newDescriber(cfg.Batching, 1000, w.BatchDelay, cfg.Clock, c.describeSnapshotsByName)
	c.modifications = newDescriber(cfg.Batching, 500, w.BatchDelay, cfg.Clock, c.describeModificationsByID)
	return c
}

// describer looks keys up one at a time, through a batcher when batching is on.
type describer[K comparable, V any] struct {
	batch *batcher.Batcher[K, V]
	exec  batcher.Exec[K, V]
}

func newDescriber[K comparable, V any](on bool, max int, delay time.Duration, clk clock.WithDelayedExecution, exec batcher.Exec[K, V]) describer[K, V] {
	d := describer[K, V]{exec: exec}
	if on {
		d.batch = batcher.New(batcher.Config{MaxEntries: max, MaxDelay: delay, Timeout: 30 * time.Second, Clock: clk}, exec)
	}
	return d
}

func (d describer[K, V]) get(ctx context.Context, key K) (V, error) {
	var zero V
	var v V
	var err error
	if d.batch != nil {
		v, err = d.batch.Get(ctx, key)
	} else {
		var m map[K]V
		m, err = d.exec(ctx, []K{key})
		if err == nil {
			var ok bool
			if v, ok = m[key]; !ok {
				err = batcher.ErrNotInResult
			}
		}
	}
	if err == batcher.ErrNotInResult {
		return zero, fmt.Errorf("%v: %w", key, ErrNotFound)
	}
	return v, err
}
