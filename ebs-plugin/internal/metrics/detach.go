package metrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

const (
	// DetachPendingThreshold is how long a detach must be pending before it has a series, as upstream: a
	// series per volume of every ordinary detach would multiply the cardinality for nothing.
	DetachPendingThreshold = time.Minute
	// detachForgetAfter drops a volume not seen for this long (its controller lost the lease, or stopped
	// waiting), so the tracker cannot grow without bound.
	detachForgetAfter = 15 * time.Minute
)

// DetachTracker serves aws_ebs_csi_ec2_detach_pending_seconds_total{volume_id,instance_id,attachment_state},
// the seconds since EC2 accepted a detach that has not finished, and the collector's own
// aws_ebs_csi_ec2_collector_scrapes_total and _duration_seconds, with upstream's names and buckets. A nil
// *DetachTracker records nothing.
type DetachTracker struct {
	pending   *prometheus.Desc
	duration  prometheus.Histogram
	scrapes   prometheus.Counter
	threshold time.Duration
	now       func() time.Time

	mu        sync.Mutex
	detaching map[attachment]detaching
}

type attachment struct{ volumeID, instanceID string }

type detaching struct {
	since, seen time.Time
	state       string
}

func newDetachTracker(threshold time.Duration, now func() time.Time) *DetachTracker {
	return &DetachTracker{
		pending: prometheus.NewDesc("aws_ebs_csi_ec2_detach_pending_seconds_total",
			"Seconds since EC2 accepted a DetachVolume that has not finished, by the attachment's state.",
			[]string{"volume_id", "instance_id", "attachment_state"}, nil),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "aws_ebs_csi_ec2_collector_duration_seconds",
			Help:    "Duration of the EC2 collector's scrapes in seconds.",
			Buckets: []float64{0.01, 0.1, 0.5, 1, 2.5, 5, 10},
		}),
		scrapes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "aws_ebs_csi_ec2_collector_scrapes_total",
			Help: "Number of scrapes of the EC2 collector.",
		}),
		threshold: threshold,
		now:       now,
		detaching: map[attachment]detaching{},
	}
}

// Pending records that the volume's detach from the instance is still in state (detaching, busy ...).
func (d *DetachTracker) Pending(volumeID, instanceID, state string) {
	if d == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	a := attachment{volumeID, instanceID}
	now := d.now()
	since := now
	if prev, ok := d.detaching[a]; ok {
		since = prev.since
	}
	d.detaching[a] = detaching{since: since, seen: now, state: state}
}

// Done records that the detach finished.
func (d *DetachTracker) Done(volumeID, instanceID string) {
	if d == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.detaching, attachment{volumeID, instanceID})
}

// Describe implements prometheus.Collector.
func (d *DetachTracker) Describe(ch chan<- *prometheus.Desc) {
	ch <- d.pending
	ch <- d.duration.Desc()
	ch <- d.scrapes.Desc()
}

// Collect implements prometheus.Collector.
func (d *DetachTracker) Collect(ch chan<- prometheus.Metric) {
	start := time.Now()
	d.scrapes.Inc()
	d.mu.Lock()
	now := d.now()
	for a, v := range d.detaching {
		if now.Sub(v.seen) > detachForgetAfter {
			delete(d.detaching, a)
			continue
		}
		if pending := now.Sub(v.since); pending >= d.threshold {
			ch <- prometheus.MustNewConstMetric(d.pending, prometheus.GaugeValue, pending.Seconds(), a.volumeID, a.instanceID, v.state)
		}
	}
	d.mu.Unlock()
	d.duration.Observe(time.Since(start).Seconds())
	ch <- d.duration
	ch <- d.scrapes
}
