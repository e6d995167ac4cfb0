package nvmemetrics

import (
	"github.com/prometheus/client_golang/prometheus"
)

// families are the descriptors and the collector's own metrics for one instance ID.
type families struct {
	readOps, writeOps, readBytes, writeBytes *prometheus.Desc
	readSeconds, writeSeconds                *prometheus.Desc
	exceededIOPS, exceededTP                 *prometheus.Desc
	ec2ExceededIOPS, ec2ExceededTP           *prometheus.Desc
	queueLength, readLatency, writeLatency   *prometheus.Desc
	scrapes, errors                          prometheus.Counter
	duration                                 prometheus.Histogram
}

// newFamilies builds upstream's families, with its help texts, for the instance instanceID.
func newFamilies(instanceID string) *families {
	constLabels := prometheus.Labels{"instance_id": instanceID}
	desc := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, []string{"volume_id"}, constLabels)
	}
	return &families{
		readOps:         desc(metricReadOps, "The total number of completed read operations."),
		writeOps:        desc(metricWriteOps, "The total number of completed write operations."),
		readBytes:       desc(metricReadBytes, "The total number of read bytes transferred."),
		writeBytes:      desc(metricWriteBytes, "The total number of write bytes transferred."),
		readSeconds:     desc(metricReadSeconds, "The total time spent, in seconds, by all completed read operations."),
		writeSeconds:    desc(metricWriteSeconds, "The total time spent, in seconds, by all completed write operations."),
		exceededIOPS:    desc(metricExceededIOPS, "The total time, in seconds, that IOPS demand exceeded the volume's provisioned IOPS performance."),
		exceededTP:      desc(metricExceededTP, "The total time, in seconds, that throughput demand exceeded the volume's provisioned throughput performance."),
		ec2ExceededIOPS: desc(metricEC2ExceededIOPS, "The total time, in seconds, that the EBS volume exceeded the attached Amazon EC2 instance's maximum IOPS performance."),
		ec2ExceededTP:   desc(metricEC2ExceededTP, "The total time, in seconds, that the EBS volume exceeded the attached Amazon EC2 instance's maximum throughput performance."),
		queueLength:     desc(metricQueueLength, "The number of read and write operations waiting to be completed."),
		readLatency:     desc(metricReadLatency, "The number of read operations completed within each latency bin, in seconds."),
		writeLatency:    desc(metricWriteLatency, "The number of write operations completed within each latency bin, in seconds."),
		scrapes: prometheus.NewCounter(prometheus.CounterOpts{Name: metricScrapes,
			Help: "Total number of NVMe collector scrapes.", ConstLabels: constLabels}),
		errors: prometheus.NewCounter(prometheus.CounterOpts{Name: metricErrors,
			Help: "Total number of NVMe collector scrape errors.", ConstLabels: constLabels}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: metricDuration,
			Help: "Histogram of NVMe collector scrape duration in seconds.", Buckets: durationBuckets(), ConstLabels: constLabels}),
	}
}

// send emits one volume's series. Times go from microseconds to seconds, as upstream converts them.
func (f *families) send(ch chan<- prometheus.Metric, volumeID string, s Stats) {
	// The New* forms, not Must*: a volume ID the registry refuses (not UTF-8) fails the scrape's series,
	// not the process.
	send := func(d *prometheus.Desc, m prometheus.Metric, err error) {
		if err != nil {
			m = prometheus.NewInvalidMetric(d, err)
		}
		ch <- m
	}
	counter := func(d *prometheus.Desc, v float64) {
		m, err := prometheus.NewConstMetric(d, prometheus.CounterValue, v, volumeID)
		send(d, m, err)
	}
	counter(f.readOps, float64(s.ReadOps))
	counter(f.writeOps, float64(s.WriteOps))
	counter(f.readBytes, float64(s.ReadBytes))
	counter(f.writeBytes, float64(s.WriteBytes))
	counter(f.readSeconds, float64(s.TotalReadTime)/microsPerSecond)
	counter(f.writeSeconds, float64(s.TotalWriteTime)/microsPerSecond)
	counter(f.exceededIOPS, float64(s.EBSIOPSExceeded)/microsPerSecond)
	counter(f.exceededTP, float64(s.EBSThroughputExceeded)/microsPerSecond)
	counter(f.ec2ExceededIOPS, float64(s.EC2IOPSExceeded)/microsPerSecond)
	counter(f.ec2ExceededTP, float64(s.EC2ThroughputExceeded)/microsPerSecond)
	m, err := prometheus.NewConstMetric(f.queueLength, prometheus.GaugeValue, float64(s.QueueLength), volumeID)
	send(f.queueLength, m, err)
	for _, h := range []struct {
		desc *prometheus.Desc
		bins []Bin
	}{{f.readLatency, s.ReadLatency}, {f.writeLatency, s.WriteLatency}} {
		count, buckets := cumulative(h.bins)
		// The page has no sum of latencies, so the sum is 0, as upstream sends it.
		m, err := prometheus.NewConstHistogram(h.desc, count, 0, buckets, volumeID)
		send(h.desc, m, err)
	}
}

// cumulative turns the device's bins into Prometheus buckets: each bin's upper bound, in seconds, holds the
// operations of that bin and of every bin before it. The device's bins are ordered and disjoint.
func cumulative(bins []Bin) (uint64, map[float64]uint64) {
	var count uint64
	buckets := make(map[float64]uint64, len(bins))
	for _, b := range bins {
		count += b.Count
		buckets[float64(b.Upper)/microsPerSecond] = count
	}
	return count, buckets
}
