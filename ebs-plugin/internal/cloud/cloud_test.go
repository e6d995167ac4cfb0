package cloud

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/go-logr/logr/funcr"
	"k8s.io/klog/v2"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/stowage-csi/stowage/ebs-plugin/internal/metrics"
	"github.com/stowage-csi/stowage/shared/testutil"
)

// ec2Handler answers EC2 Query requests from a table of actions: each returns the XML body inside the
// <ActionResponse> element, or an error code and message.
type ec2Handler struct {
	mu      sync.Mutex
	calls   map[string][]url.Values
	actions map[string]func(form url.Values) (body, code, msg string)
}

func (h *ec2Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_ = r.ParseForm()
	action := r.Form.Get("Action")
	h.mu.Lock()
	h.calls[action] = append(h.calls[action], r.Form)
	fn := h.actions[action]
	h.mu.Unlock()
	if fn == nil {
		http.Error(w, "unexpected action "+action, http.StatusBadRequest)
		return
	}
	body, code, msg := fn(r.Form)
	w.Header().Set("Content-Type", "text/xml")
	if code != "" {
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, `<Response><Errors><Error><Code>%s</Code><Message>%s</Message></Error></Errors><RequestID>r</RequestID></Response>`, code, msg)
		return
	}
	fmt.Fprintf(w, `<%sResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/"><requestId>r</requestId>%s</%sResponse>`, action, body, action)
}

func (h *ec2Handler) count(action string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.calls[action])
}

func (h *ec2Handler) call(action string, i int) url.Values {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.calls[action][i]
}

var fastWaits = Waits{
	CreateInitialDelay: time.Millisecond,
	Create:             Backoff{Initial: time.Millisecond, Factor: 1, Steps: 5},
	Attach:             Backoff{Initial: time.Millisecond, Factor: 1, Steps: 5},
	Modify:             Backoff{Initial: time.Millisecond, Factor: 1, Steps: 5},
	AttachingTimeout:   time.Minute,
	BatchDelay:         30 * time.Millisecond,
}

func newTestCloud(t *testing.T, batching bool, actions map[string]func(url.Values) (string, string, string)) (*Cloud, *ec2Handler, *metrics.Recorder) {
	t.Helper()
	return newTestCloudWith(t, Config{Batching: batching, Waits: fastWaits}, actions)
}

// newTestCloudWith serves actions from a test EC2 endpoint to a Cloud configured by cfg.
func newTestCloudWith(t *testing.T, cfg Config, actions map[string]func(url.Values) (string, string, string)) (*Cloud, *ec2Handler, *metrics.Recorder) {
	t.Helper()
	h := &ec2Handler{calls: map[string][]url.Values{}, actions: actions}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	rec := metrics.New()
	client := ec2.NewFromConfig(aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("AKID", "secret", "")},
		func(o *ec2.Options) {
			o.BaseEndpoint = aws.String(srv.URL)
			o.APIOptions = append(o.APIOptions, metricsMiddleware(rec))
		})
	return newCloud(client, cfg), h, rec
}

func volumeXML(id, state string, size int, attachments string) string {
	return fmt.Sprintf(`<item><volumeId>%s</volumeId><size>%d</size><availabilityZone>us-east-1a</availabilityZone><status>%s</status><volumeType>gp3</volumeType><iops>3000</iops><throughput>125</throughput><attachmentSet>%s</attachmentSet><tagSet/></item>`,
		id, size, state, attachments)
}

func describeFrom(vols map[string]string) func(url.Values) (string, string, string) {
	return func(f url.Values) (string, string, string) {
		var items, missing []string
		for i := 1; f.Get(fmt.Sprintf("VolumeId.%d", i)) != ""; i++ {
			id := f.Get(fmt.Sprintf("VolumeId.%d", i))
			if x, ok := vols[id]; ok {
				items = append(items, x)
			} else {
				missing = append(missing, id)
			}
		}
		if len(missing) > 0 {
			return "", "InvalidVolume.NotFound", fmt.Sprintf("The volume '%s' does not exist.", strings.Join(missing, ", "))
		}
		return "<volumeSet>" + strings.Join(items, "") + "</volumeSet>", "", ""
	}
}

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func TestCreateDiskClientTokenAndMismatchRecovery(t *testing.T) {
	mismatch := true
	c, h, _ := newTestCloud(t, false, map[string]func(url.Values) (string, string, string){
		"CreateVolume": func(f url.Values) (string, string, string) {
			if f.Get("DryRun") == "true" {
				t.Error("no IOPS requested, yet a DryRun was sent")
			}
			if mismatch {
				mismatch = false
				return "", "IdempotentParameterMismatch", "token reused"
			}
			return "<volumeId>vol-1</volumeId><size>2</size><status>creating</status>", "", ""
		},
		"DescribeVolumes": describeFrom(map[string]string{"vol-1": volumeXML("vol-1", "available", 2, "")}),
	})
	_, err := c.CreateDisk(context.Background(), "pvc-a", DiskOptions{CapacityBytes: 2 << 30, VolumeType: "gp3", AvailabilityZone: "us-east-1a"})
	if !errors.Is(err, ErrAlreadyExists) {
		t.Fatalf("mismatch: err = %v", err)
	}
	d, err := c.CreateDisk(context.Background(), "pvc-a", DiskOptions{CapacityBytes: 2 << 30, VolumeType: "gp3", AvailabilityZone: "us-east-1a"})
	if err != nil || d.VolumeID != "vol-1" || d.CapacityGiB != 2 {
		t.Fatalf("retry: %+v %v", d, err)
	}
	if got := h.call("CreateVolume", 0).Get("ClientToken"); got != sha("pvc-a") {
		t.Errorf("first token %s, want sha256(pvc-a)", got)
	}
	if got := h.call("CreateVolume", 1).Get("ClientToken"); got != sha("pvc-a-2") {
		t.Errorf("token after mismatch %s, want sha256(pvc-a-2)", got)
	}
	f := h.call("CreateVolume", 1)
	if f.Get("TagSpecification.1.Tag.1.Key") != "CSIVolumeName" || f.Get("TagSpecification.1.Tag.1.Value") != "pvc-a" {
		t.Errorf("tags not sent: %v", f)
	}
}

func TestMaxIOPSDiscoveredByDryRunAndCached(t *testing.T) {
	var created []url.Values
	c, h, _ := newTestCloud(t, false, map[string]func(url.Values) (string, string, string){
		"CreateVolume": func(f url.Values) (string, string, string) {
			if f.Get("DryRun") == "true" {
				if f.Get("Size") != "4" || f.Get("Iops") != "2147483647" {
					t.Errorf("dry run form %v", f)
				}
				return "", "InvalidParameterValue", "Volume iops of 2147483647 is too high; maximum is 12000."
			}
			created = append(created, f)
			return "<volumeId>vol-1</volumeId>", "", ""
		},
		"DescribeVolumes": describeFrom(map[string]string{"vol-1": volumeXML("vol-1", "available", 100, "")}),
	})
	for i := range 2 {
		if _, err := c.CreateDisk(context.Background(), fmt.Sprintf("v%d", i), DiskOptions{CapacityBytes: 100 << 30, VolumeType: "gp3", IOPS: 16000, AvailabilityZone: "us-east-1a"}); err != nil {
			t.Fatal(err)
		}
	}
	if n := h.count("CreateVolume"); n != 3 {
		t.Fatalf("CreateVolume calls = %d, want 1 dry run + 2 creates", n)
	}
	for _, f := range created {
		if f.Get("Iops") != "12000" {
			t.Errorf("iops %s, want the discovered maximum 12000", f.Get("Iops"))
		}
	}
}

func TestBatchedDescribeSurvivesNotFoundOfOneVolume(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	c, h, _ := newTestCloudWith(t, Config{Batching: true, Waits: fastWaits, Clock: clk}, map[string]func(url.Values) (string, string, string){
		"DescribeVolumes": describeFrom(map[string]string{
			"vol-a": volumeXML("vol-a", "available", 1, ""), "vol-b": volumeXML("vol-b", "in-use", 2, ""),
		}),
	})
	ids := []string{"vol-a", "vol-b", "vol-gone", "vol-a"}
	results := make([]chan error, len(ids))
	for i, id := range ids {
		results[i] = make(chan error, 1)
		go func() {
			_, err := c.GetDisk(context.Background(), id)
			results[i] <- err
		}()
	}
	testutil.Eventually(t, time.Minute, "every GetDisk to join the batch", func() (bool, error) {
		if n := c.volumes.batch.Waiting(); n != len(ids) {
			return false, fmt.Errorf("%d waiting", n)
		}
		return true, nil
	})
	clk.Step(fastWaits.BatchDelay)
	for i, id := range ids {
		err := <-results[i]
		if wantNotFound := id == "vol-gone"; wantNotFound != errors.Is(err, ErrNotFound) || !wantNotFound && err != nil {
			t.Errorf("GetDisk(%s) = %v", id, err)
		}
	}
	if n := h.count("DescribeVolumes"); n != 2 {
		t.Fatalf("DescribeVolumes calls = %d, want 2 (the batch, then the batch without the missing ID)", n)
	}
}

func TestAttachPicksAnotherNameAfterAlreadyInUse(t *testing.T) {
	attached := ""
	c, h, _ := newTestCloud(t, false, map[string]func(url.Values) (string, string, string){
		"DescribeInstances": func(url.Values) (string, string, string) {
			return `<reservationSet><item><instancesSet><item><instanceId>i-1</instanceId><blockDeviceMapping><item><deviceName>/dev/xvda</deviceName><ebs><volumeId>vol-root</volumeId></ebs></item></blockDeviceMapping></item></instancesSet></item></reservationSet>`, "", ""
		},
		"AttachVolume": func(f url.Values) (string, string, string) {
			if f.Get("Device") == "/dev/xvdaa" {
				return "", "InvalidParameterValue", "Invalid value '/dev/xvdaa' for unixDevice. Attachment point /dev/xvdaa is already in use"
			}
			attached = f.Get("Device")
			return "<device>" + attached + "</device><status>attaching</status>", "", ""
		},
		"DescribeVolumes": func(url.Values) (string, string, string) {
			att := fmt.Sprintf(`<item><instanceId>i-1</instanceId><device>%s</device><status>attached</status></item>`, attached)
			return "<volumeSet>" + volumeXML("vol-1", "in-use", 1, att) + "</volumeSet>", "", ""
		},
	})
	if _, err := c.AttachDisk(context.Background(), "vol-1", "i-1"); err == nil || !strings.Contains(err.Error(), "already in use") {
		t.Fatalf("first attach: %v", err)
	}
	dev, err := c.AttachDisk(context.Background(), "vol-1", "i-1")
	if err != nil || dev != "/dev/xvdab" {
		t.Fatalf("second attach: %s %v", dev, err)
	}
	if h.count("AttachVolume") != 2 {
		t.Fatalf("attach calls %d", h.count("AttachVolume"))
	}
}

func TestAttachStuckAttachingIsDetachedAndTheOutcomeReported(t *testing.T) {
	tests := []struct {
		name       string
		detachCode string
		wantErr    []string
		notWant    string
	}{
		{name: "detach works", wantErr: []string{"stuck attaching", "detached it"}, notWant: "failed"},
		{name: "detach fails", detachCode: "UnauthorizedOperation", wantErr: []string{"stuck attaching", "detaching it failed", "UnauthorizedOperation"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			detached := false
			c, h, _ := newTestCloud(t, false, map[string]func(url.Values) (string, string, string){
				"DescribeInstances": func(url.Values) (string, string, string) {
					return `<reservationSet><item><instancesSet><item><instanceId>i-1</instanceId></item></instancesSet></item></reservationSet>`, "", ""
				},
				"AttachVolume": func(url.Values) (string, string, string) {
					return "<device>/dev/xvdaa</device><status>attaching</status>", "", ""
				},
				"DetachVolume": func(url.Values) (string, string, string) {
					if tc.detachCode != "" {
						return "", tc.detachCode, "not allowed"
					}
					mu.Lock()
					detached = true
					mu.Unlock()
					return "<status>detaching</status>", "", ""
				},
				"DescribeVolumes": func(url.Values) (string, string, string) {
					mu.Lock()
					defer mu.Unlock()
					att := `<item><instanceId>i-1</instanceId><device>/dev/xvdaa</device><status>attaching</status><attachTime>2020-01-01T00:00:00.000Z</attachTime></item>`
					if detached {
						att = ""
					}
					return "<volumeSet>" + volumeXML("vol-1", "in-use", 1, att) + "</volumeSet>", "", ""
				},
			})
			_, err := c.AttachDisk(context.Background(), "vol-1", "i-1")
			if err == nil {
				t.Fatal("attach of a volume stuck attaching succeeded")
			}
			for _, want := range tc.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
			if tc.notWant != "" && strings.Contains(err.Error(), tc.notWant) {
				t.Errorf("error %q says %q", err, tc.notWant)
			}
			if h.count("DetachVolume") != 1 {
				t.Errorf("DetachVolume calls = %d, want 1", h.count("DetachVolume"))
			}
		})
	}
}

func TestDetachTreatsMissingAttachmentAsDone(t *testing.T) {
	c, h, rec := newTestCloud(t, false, map[string]func(url.Values) (string, string, string){
		"DetachVolume": func(url.Values) (string, string, string) {
			return "", "IncorrectState", "Volume 'vol-1' is in the 'available' state."
		},
	})
	if err := c.DetachDisk(context.Background(), "vol-1", "i-1"); err != nil {
		t.Fatal(err)
	}
	if h.count("DescribeVolumes") != 0 {
		t.Fatal("waited for a detach that never started")
	}
	if got := metricValue(t, rec, "aws_ebs_csi_api_request_errors_total", "code", "IncorrectState"); got != 1 {
		t.Fatalf("errors_total{DetachVolume,IncorrectState} = %v", got)
	}
}

// metricValue reads one labelled counter from the recorder's registry.
func metricValue(t *testing.T, rec *metrics.Recorder, name, label, value string) float64 {
	t.Helper()
	mfs, err := rec.Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

func TestThrottledAttemptsAreCounted(t *testing.T) {
	throttled := false
	c, _, rec := newTestCloud(t, false, map[string]func(url.Values) (string, string, string){
		"DescribeAvailabilityZones": func(url.Values) (string, string, string) {
			if !throttled {
				throttled = true
				return "", "RequestLimitExceeded", "Request limit exceeded."
			}
			return "<availabilityZoneInfo><item><zoneName>us-east-1b</zoneName></item><item><zoneName>us-east-1a</zoneName></item></availabilityZoneInfo>", "", ""
		},
	})
	zones, err := c.AvailabilityZones(context.Background())
	if err != nil || strings.Join(zones, ",") != "us-east-1a,us-east-1b" {
		t.Fatalf("zones %v %v", zones, err)
	}
	if got := metricValue(t, rec, "aws_ebs_csi_api_request_throttles_total", "operation_name", "DescribeAvailabilityZones"); got != 1 {
		t.Fatalf("throttles = %v", got)
	}
	// Per attempt, as upstream: the throttled attempt is a throttle, not an error, and only the successful
	// attempt is timed.
	if got := metricValue(t, rec, "aws_ebs_csi_api_request_errors_total", "request", "DescribeAvailabilityZones"); got != 0 {
		t.Errorf("errors = %v, want 0: a throttle is not an error", got)
	}
	if got := histogramCount(t, rec, "DescribeAvailabilityZones"); got != 1 {
		t.Errorf("duration observations = %d, want the 1 successful attempt", got)
	}
}

// Every failed attempt counts, not the call: a retried timeout counts twice before the success.
func TestRetriedErrorsCountPerAttempt(t *testing.T) {
	failures := 0
	c, _, rec := newTestCloud(t, false, map[string]func(url.Values) (string, string, string){
		"DescribeAvailabilityZones": func(url.Values) (string, string, string) {
			if failures < 2 {
				failures++
				return "", "RequestTimeout", "The request timed out."
			}
			return "<availabilityZoneInfo><item><zoneName>us-east-1a</zoneName></item></availabilityZoneInfo>", "", ""
		},
	})
	if _, err := c.AvailabilityZones(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := metricValue(t, rec, "aws_ebs_csi_api_request_errors_total", "code", "RequestTimeout"); got != 2 {
		t.Errorf("errors{RequestTimeout} = %v, want 2 attempts", got)
	}
	if got := histogramCount(t, rec, "DescribeAvailabilityZones"); got != 1 {
		t.Errorf("duration observations = %d, want the 1 successful attempt", got)
	}
}

// histogramCount reads the observation count of aws_ebs_csi_api_request_duration_seconds{request}.
func histogramCount(t *testing.T, rec *metrics.Recorder, request string) uint64 {
	t.Helper()
	mfs, err := rec.Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "aws_ebs_csi_api_request_duration_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if len(m.GetLabel()) == 1 && m.GetLabel()[0].GetValue() == request {
				return m.GetHistogram().GetSampleCount()
			}
		}
	}
	return 0
}

var regexpTput = regexp.MustCompile(`<throughput>\d+</throughput>`)

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

func itoa(n int) string { return strconv.Itoa(n) }

func TestVolumeLimitExceededFindsAVolumeAnEarlierAttemptCreated(t *testing.T) {
	for _, tc := range []struct {
		name   string
		tagged string // the volumes DescribeVolumes finds by the name tag
		wantID string
	}{
		{"the earlier attempt created it", volumeXML("vol-9", "available", 2, ""), "vol-9"},
		{"nothing was created", "", ""},
		{"two volumes carry the name", volumeXML("vol-8", "available", 2, "") + volumeXML("vol-9", "available", 2, ""), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, h, _ := newTestCloud(t, false, map[string]func(url.Values) (string, string, string){
				"CreateVolume": func(url.Values) (string, string, string) {
					return "", "VolumeLimitExceeded", "You have exceeded your maximum gp3 storage limit of 1 TiB in this region."
				},
				"DescribeVolumes": func(f url.Values) (string, string, string) {
					if f.Get("Filter.1.Name") == "tag:CSIVolumeName" {
						if f.Get("Filter.1.Value.1") != "pvc-q" {
							t.Errorf("looked up by %v", f)
						}
						return "<volumeSet>" + tc.tagged + "</volumeSet>", "", ""
					}
					return describeFrom(map[string]string{"vol-9": volumeXML("vol-9", "available", 2, "")})(f)
				},
			})
			d, err := c.CreateDisk(context.Background(), "pvc-q", DiskOptions{CapacityBytes: 2 << 30, VolumeType: "gp3", AvailabilityZone: "us-east-1a"})
			if tc.wantID != "" {
				if err != nil || d.VolumeID != tc.wantID {
					t.Fatalf("CreateDisk = %+v, %v; want %s", d, err, tc.wantID)
				}
				return
			}
			if !errors.Is(err, ErrLimitExceeded) {
				t.Fatalf("CreateDisk = %+v, %v; want ErrLimitExceeded", d, err)
			}
			if h.count("DescribeVolumes") != 1 {
				t.Errorf("DescribeVolumes sent %d times, want once (the tag lookup)", h.count("DescribeVolumes"))
			}
		})
	}
}

func TestSDKDebugLoggingLogsRequestsWithTheCallersLogger(t *testing.T) {
	h := &ec2Handler{calls: map[string][]url.Values{}, actions: map[string]func(url.Values) (string, string, string){
		"DescribeVolumes": describeFrom(map[string]string{"vol-1": volumeXML("vol-1", "available", 1, "")}),
	}}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	client := ec2.NewFromConfig(aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("AKID", "secret", "")},
		func(o *ec2.Options) { o.BaseEndpoint = aws.String(srv.URL) }, sdkDebugLogging)
	c := newCloud(client, Config{Waits: fastWaits})

	var mu sync.Mutex
	var lines []string
	logger := funcr.New(func(prefix, args string) {
		mu.Lock()
		defer mu.Unlock()
		lines = append(lines, prefix+" "+args)
	}, funcr.Options{})
	ctx := klog.NewContext(context.Background(), logger.WithName("csi-call").WithValues("volumeID", "vol-1"))
	if _, err := c.GetDisk(ctx, "vol-1"); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	var request, response bool
	for _, l := range lines {
		if !strings.Contains(l, "csi-call") || !strings.Contains(l, `"volumeID"="vol-1"`) {
			t.Errorf("SDK log line without the caller's logger: %s", l)
		}
		request = request || strings.Contains(l, "Action=DescribeVolumes")
		response = response || strings.Contains(l, "<volumeId>vol-1</volumeId>")
	}
	if !request || !response {
		t.Fatalf("request logged %t, response logged %t, in %q", request, response, lines)
	}
	if strings.Contains(strings.Join(lines, "\n"), "secret") {
		t.Error("the secret key was logged")
	}
}
