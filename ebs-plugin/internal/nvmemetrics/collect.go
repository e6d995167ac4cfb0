package nvmemetrics

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/klog/v2"
)

// Upstream's metric names; every one carries the const label instance_id, and the per-volume ones volume_id.
const (
	prefix                = "aws_ebs_csi_"
	metricReadOps         = prefix + "read_ops_total"
	metricWriteOps        = prefix + "write_ops_total"
	metricReadBytes       = prefix + "read_bytes_total"
	metricWriteBytes      = prefix + "write_bytes_total"
	metricReadSeconds     = prefix + "read_seconds_total"
	metricWriteSeconds    = prefix + "write_seconds_total"
	metricExceededIOPS    = prefix + "exceeded_iops_seconds_total"
	metricExceededTP      = prefix + "exceeded_tp_seconds_total"
	metricEC2ExceededIOPS = prefix + "ec2_exceeded_iops_seconds_total"
	metricEC2ExceededTP   = prefix + "ec2_exceeded_tp_seconds_total"
	metricQueueLength     = prefix + "volume_queue_length"
	metricReadLatency     = prefix + "read_io_latency_seconds"
	metricWriteLatency    = prefix + "write_io_latency_seconds"
	metricScrapes         = prefix + "nvme_collector_scrapes_total"
	metricErrors          = prefix + "nvme_collector_errors_total"
	metricDuration        = prefix + "nvme_collector_duration_seconds"

	microsPerSecond = 1e6
	// instanceIDTimeout bounds one metadata lookup, so a scrape never hangs on it.
	instanceIDTimeout = 10 * time.Second
)

// durationBuckets are upstream's bounds for the collector's own duration histogram.
func durationBuckets() []float64 {
	return []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}
}

// Device is an EBS NVMe device backing a CSI mount.
type Device struct {
	// Path is the whole-disk device node, e.g. /dev/nvme1n1.
	Path     string
	VolumeID string
}

// Source finds the devices and reads their log pages: the system in production, captured bytes in tests.
type Source interface {
	Devices() ([]Device, error)
	ReadLogPage(path string) ([]byte, error)
}

// Config configures a Collector.
type Config struct {
	Source Source
	// InstanceID returns this instance's ID, the instance_id label of every series.
	InstanceID func(context.Context) (string, error)
	// Now times the scrape; time.Now when nil.
	Now func() time.Time
}

// Collector is a prometheus.Collector that reads every device at scrape time.
type Collector struct {
	// ctx bounds the metadata lookups that Collect makes: Prometheus gives Collect no context.
	ctx context.Context
	cfg Config

	mu sync.Mutex
	// fams exists once the instance ID is known: the node plugin starts without asking the metadata,
	// and every series needs the ID.
	fams *families
}

// New returns a Collector; ctx is the lifetime of the process that serves it.
func New(ctx context.Context, cfg Config) *Collector {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Collector{ctx: ctx, cfg: cfg}
}

// Describe sends nothing, which makes the collector unchecked: its descriptors carry the instance ID,
// which is not known before the first scrape.
func (c *Collector) Describe(chan<- *prometheus.Desc) {}

// Collect reads every device and sends its series, then the collector's scrape count, error count and
// duration. A device that cannot be read or parsed counts one error and is left out; the others are sent.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	logger := klog.FromContext(c.ctx)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fams == nil {
		id, err := c.instanceID()
		if err != nil {
			logger.Error(err, "NVMe metrics: instance ID unavailable; no NVMe series this scrape")
			return
		}
		c.fams = newFamilies(id)
	}
	f := c.fams
	f.scrapes.Inc()
	start := c.cfg.Now()
	defer func() {
		f.duration.Observe(c.cfg.Now().Sub(start).Seconds())
		ch <- f.duration
		ch <- f.scrapes
		ch <- f.errors
	}()

	devices, err := c.cfg.Source.Devices()
	if err != nil {
		logger.Error(err, "NVMe metrics: listing EBS NVMe devices")
		f.errors.Inc()
		return
	}
	for _, d := range devices {
		page, err := c.cfg.Source.ReadLogPage(d.Path)
		if err != nil {
			logger.Error(err, "NVMe metrics: reading the EBS log page", "device", d.Path, "volumeID", d.VolumeID)
			f.errors.Inc()
			continue
		}
		stats, err := Parse(page)
		if err != nil {
			logger.Error(err, "NVMe metrics: parsing the EBS log page", "device", d.Path, "volumeID", d.VolumeID)
			f.errors.Inc()
			continue
		}
		f.send(ch, d.VolumeID, stats)
	}
}

func (c *Collector) instanceID() (string, error) {
	ctx, cancel := context.WithTimeout(c.ctx, instanceIDTimeout)
	defer cancel()
	id, err := c.cfg.InstanceID(ctx)
	if err == nil && id == "" {
		err = errors.New("instance metadata has an empty instance ID")
	}
	return id, err
}
