package nvmemetrics

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// fakeSource serves captured log pages, or errors, per device.
type fakeSource struct {
	devices []Device
	listErr error
	pages   map[string][]byte
	readErr map[string]error
}

func (s *fakeSource) Devices() ([]Device, error) { return s.devices, s.listErr }

func (s *fakeSource) ReadLogPage(path string) ([]byte, error) {
	if err := s.readErr[path]; err != nil {
		return nil, err
	}
	return s.pages[path], nil
}

// steppingClock advances by step at each reading, so every scrape lasts exactly step.
func steppingClock(step time.Duration) func() time.Time {
	now := time.Unix(1_700_000_000, 0)
	return func() time.Time {
		now = now.Add(step)
		return now
	}
}

func newTestCollector(src Source) *Collector {
	return New(context.Background(), Config{
		Source:     src,
		InstanceID: func(context.Context) (string, error) { return "i-0123456789abcdef0", nil },
		Now:        steppingClock(3 * time.Millisecond),
	})
}

// collectorSeries is the collector's own series after one scrape of 3ms with errs errors, as upstream
// serves them.
func collectorSeries(errs string) string {
	return `
# HELP aws_ebs_csi_nvme_collector_duration_seconds Histogram of NVMe collector scrape duration in seconds.
# TYPE aws_ebs_csi_nvme_collector_duration_seconds histogram
aws_ebs_csi_nvme_collector_duration_seconds_bucket{instance_id="i-0123456789abcdef0",le="0.001"} 0
aws_ebs_csi_nvme_collector_duration_seconds_bucket{instance_id="i-0123456789abcdef0",le="0.0025"} 0
aws_ebs_csi_nvme_collector_duration_seconds_bucket{instance_id="i-0123456789abcdef0",le="0.005"} 1
aws_ebs_csi_nvme_collector_duration_seconds_bucket{instance_id="i-0123456789abcdef0",le="0.01"} 1
aws_ebs_csi_nvme_collector_duration_seconds_bucket{instance_id="i-0123456789abcdef0",le="0.025"} 1
aws_ebs_csi_nvme_collector_duration_seconds_bucket{instance_id="i-0123456789abcdef0",le="0.05"} 1
aws_ebs_csi_nvme_collector_duration_seconds_bucket{instance_id="i-0123456789abcdef0",le="0.1"} 1
aws_ebs_csi_nvme_collector_duration_seconds_bucket{instance_id="i-0123456789abcdef0",le="0.25"} 1
aws_ebs_csi_nvme_collector_duration_seconds_bucket{instance_id="i-0123456789abcdef0",le="0.5"} 1
aws_ebs_csi_nvme_collector_duration_seconds_bucket{instance_id="i-0123456789abcdef0",le="1"} 1
aws_ebs_csi_nvme_collector_duration_seconds_bucket{instance_id="i-0123456789abcdef0",le="2.5"} 1
aws_ebs_csi_nvme_collector_duration_seconds_bucket{instance_id="i-0123456789abcdef0",le="5"} 1
aws_ebs_csi_nvme_collector_duration_seconds_bucket{instance_id="i-0123456789abcdef0",le="10"} 1
aws_ebs_csi_nvme_collector_duration_seconds_bucket{instance_id="i-0123456789abcdef0",le="+Inf"} 1
aws_ebs_csi_nvme_collector_duration_seconds_sum{instance_id="i-0123456789abcdef0"} 0.003
aws_ebs_csi_nvme_collector_duration_seconds_count{instance_id="i-0123456789abcdef0"} 1
# HELP aws_ebs_csi_nvme_collector_errors_total Total number of NVMe collector scrape errors.
# TYPE aws_ebs_csi_nvme_collector_errors_total counter
aws_ebs_csi_nvme_collector_errors_total{instance_id="i-0123456789abcdef0"} ` + errs + `
# HELP aws_ebs_csi_nvme_collector_scrapes_total Total number of NVMe collector scrapes.
# TYPE aws_ebs_csi_nvme_collector_scrapes_total counter
aws_ebs_csi_nvme_collector_scrapes_total{instance_id="i-0123456789abcdef0"} 1
`
}

// volumeSeries is what upstream serves for sampleRaw's page of volume vol-0a1b2c3d4e5f60718.
const volumeSeries = `
# HELP aws_ebs_csi_read_ops_total The total number of completed read operations.
# TYPE aws_ebs_csi_read_ops_total counter
aws_ebs_csi_read_ops_total{instance_id="i-0123456789abcdef0",volume_id="vol-0a1b2c3d4e5f60718"} 11
# HELP aws_ebs_csi_write_ops_total The total number of completed write operations.
# TYPE aws_ebs_csi_write_ops_total counter
aws_ebs_csi_write_ops_total{instance_id="i-0123456789abcdef0",volume_id="vol-0a1b2c3d4e5f60718"} 12
# HELP aws_ebs_csi_read_bytes_total The total number of read bytes transferred.
# TYPE aws_ebs_csi_read_bytes_total counter
aws_ebs_csi_read_bytes_total{instance_id="i-0123456789abcdef0",volume_id="vol-0a1b2c3d4e5f60718"} 13
# HELP aws_ebs_csi_write_bytes_total The total number of write bytes transferred.
# TYPE aws_ebs_csi_write_bytes_total counter
aws_ebs_csi_write_bytes_total{instance_id="i-0123456789abcdef0",volume_id="vol-0a1b2c3d4e5f60718"} 14
# HELP aws_ebs_csi_read_seconds_total The total time spent, in seconds, by all completed read operations.
# TYPE aws_ebs_csi_read_seconds_total counter
aws_ebs_csi_read_seconds_total{instance_id="i-0123456789abcdef0",volume_id="vol-0a1b2c3d4e5f60718"} 1.5e-05
# HELP aws_ebs_csi_write_seconds_total The total time spent, in seconds, by all completed write operations.
# TYPE aws_ebs_csi_write_seconds_total counter
aws_ebs_csi_write_seconds_total{instance_id="i-0123456789abcdef0",volume_id="vol-0a1b2c3d4e5f60718"} 1.6e-05
# HELP aws_ebs_csi_exceeded_iops_seconds_total The total time, in seconds, that IOPS demand exceeded the volume's provisioned IOPS performance.
# TYPE aws_ebs_csi_exceeded_iops_seconds_total counter
aws_ebs_csi_exceeded_iops_seconds_total{instance_id="i-0123456789abcdef0",volume_id="vol-0a1b2c3d4e5f60718"} 1.7e-05
# HELP aws_ebs_csi_exceeded_tp_seconds_total The total time, in seconds, that throughput demand exceeded the volume's provisioned throughput performance.
# TYPE aws_ebs_csi_exceeded_tp_seconds_total counter
aws_ebs_csi_exceeded_tp_seconds_total{instance_id="i-0123456789abcdef0",volume_id="vol-0a1b2c3d4e5f60718"} 1.8e-05
# HELP aws_ebs_csi_ec2_exceeded_iops_seconds_total The total time, in seconds, that the EBS volume exceeded the attached Amazon EC2 instance's maximum IOPS performance.
# TYPE aws_ebs_csi_ec2_exceeded_iops_seconds_total counter
aws_ebs_csi_ec2_exceeded_iops_seconds_total{instance_id="i-0123456789abcdef0",volume_id="vol-0a1b2c3d4e5f60718"} 1.9e-05
# HELP aws_ebs_csi_ec2_exceeded_tp_seconds_total The total time, in seconds, that the EBS volume exceeded the attached Amazon EC2 instance's maximum throughput performance.
# TYPE aws_ebs_csi_ec2_exceeded_tp_seconds_total counter
aws_ebs_csi_ec2_exceeded_tp_seconds_total{instance_id="i-0123456789abcdef0",volume_id="vol-0a1b2c3d4e5f60718"} 2e-05
# HELP aws_ebs_csi_volume_queue_length The number of read and write operations waiting to be completed.
# TYPE aws_ebs_csi_volume_queue_length gauge
aws_ebs_csi_volume_queue_length{instance_id="i-0123456789abcdef0",volume_id="vol-0a1b2c3d4e5f60718"} 21
# HELP aws_ebs_csi_read_io_latency_seconds The number of read operations completed within each latency bin, in seconds.
# TYPE aws_ebs_csi_read_io_latency_seconds histogram
aws_ebs_csi_read_io_latency_seconds_bucket{instance_id="i-0123456789abcdef0",volume_id="vol-0a1b2c3d4e5f60718",le="0.0001"} 2
aws_ebs_csi_read_io_latency_seconds_bucket{instance_id="i-0123456789abcdef0",volume_id="vol-0a1b2c3d4e5f60718",le="0.001"} 5
aws_ebs_csi_read_io_latency_seconds_bucket{instance_id="i-0123456789abcdef0",volume_id="vol-0a1b2c3d4e5f60718",le="+Inf"} 5
aws_ebs_csi_read_io_latency_seconds_sum{instance_id="i-0123456789abcdef0",volume_id="vol-0a1b2c3d4e5f60718"} 0
aws_ebs_csi_read_io_latency_seconds_count{instance_id="i-0123456789abcdef0",volume_id="vol-0a1b2c3d4e5f60718"} 5
# HELP aws_ebs_csi_write_io_latency_seconds The number of write operations completed within each latency bin, in seconds.
# TYPE aws_ebs_csi_write_io_latency_seconds histogram
aws_ebs_csi_write_io_latency_seconds_bucket{instance_id="i-0123456789abcdef0",volume_id="vol-0a1b2c3d4e5f60718",le="0.0005"} 7
aws_ebs_csi_write_io_latency_seconds_bucket{instance_id="i-0123456789abcdef0",volume_id="vol-0a1b2c3d4e5f60718",le="+Inf"} 7
aws_ebs_csi_write_io_latency_seconds_sum{instance_id="i-0123456789abcdef0",volume_id="vol-0a1b2c3d4e5f60718"} 0
aws_ebs_csi_write_io_latency_seconds_count{instance_id="i-0123456789abcdef0",volume_id="vol-0a1b2c3d4e5f60718"} 7
`

func TestCollectServesUpstreamsSeriesPerVolume(t *testing.T) {
	src := &fakeSource{
		devices: []Device{{Path: "/dev/nvme1n1", VolumeID: "vol-0a1b2c3d4e5f60718"}},
		pages:   map[string][]byte{"/dev/nvme1n1": encodePage(t, sampleRaw())},
	}
	if err := testutil.CollectAndCompare(newTestCollector(src), strings.NewReader(volumeSeries+collectorSeries("0"))); err != nil {
		t.Fatal(err)
	}
}

func TestCollectCountsAnErrorPerFailedDeviceAndServesTheOthers(t *testing.T) {
	wrongMagic := sampleRaw()
	wrongMagic.Magic = 1
	src := &fakeSource{
		devices: []Device{
			{Path: "/dev/nvme1n1", VolumeID: "vol-0a1b2c3d4e5f60718"},
			{Path: "/dev/nvme2n1", VolumeID: "vol-0ffffffffffffffff"},
			{Path: "/dev/nvme3n1", VolumeID: "vol-0eeeeeeeeeeeeeeee"},
		},
		pages: map[string][]byte{
			"/dev/nvme1n1": encodePage(t, sampleRaw()),
			"/dev/nvme3n1": encodePage(t, wrongMagic),
		},
		readErr: map[string]error{"/dev/nvme2n1": errors.New("inappropriate ioctl for device")},
	}
	if err := testutil.CollectAndCompare(newTestCollector(src), strings.NewReader(volumeSeries+collectorSeries("2"))); err != nil {
		t.Fatal(err)
	}
}

func TestCollectWithoutEBSDevicesServesOnlyTheCollectorsSeries(t *testing.T) {
	c := newTestCollector(&fakeSource{})
	if err := testutil.CollectAndCompare(c, strings.NewReader(collectorSeries("0"))); err != nil {
		t.Fatal(err)
	}
}

func TestCollectCountsAFailedDeviceListing(t *testing.T) {
	c := newTestCollector(&fakeSource{listErr: errors.New("reading the mount table: permission denied")})
	if err := testutil.CollectAndCompare(c, strings.NewReader(collectorSeries("1"))); err != nil {
		t.Fatal(err)
	}
}

func TestCollectAsksForTheInstanceIDUntilItIsKnown(t *testing.T) {
	calls := 0
	c := New(context.Background(), Config{
		Source: &fakeSource{},
		InstanceID: func(context.Context) (string, error) {
			calls++
			if calls == 1 {
				return "", errors.New("IMDS unreachable")
			}
			return "i-0123456789abcdef0", nil
		},
		Now: steppingClock(3 * time.Millisecond),
	})
	if n := testutil.CollectAndCount(c); n != 0 {
		t.Fatalf("%d series without an instance ID, want none", n)
	}
	if err := testutil.CollectAndCompare(c, strings.NewReader(collectorSeries("0"))); err != nil {
		t.Fatal(err)
	}
	const secondScrape = `
# HELP aws_ebs_csi_nvme_collector_scrapes_total Total number of NVMe collector scrapes.
# TYPE aws_ebs_csi_nvme_collector_scrapes_total counter
aws_ebs_csi_nvme_collector_scrapes_total{instance_id="i-0123456789abcdef0"} 2
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(secondScrape), metricScrapes); err != nil {
		t.Fatal(err)
	}
	if calls != 2 {
		t.Fatalf("instance ID asked %d times, want 2: once failing, then once and kept", calls)
	}
}
