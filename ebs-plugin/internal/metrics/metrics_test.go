package metrics

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestRecorderServesUpstreamNames(t *testing.T) {
	r := New()
	r.ObserveSuccess("CreateVolume", 20*time.Millisecond)
	r.ObserveError("AttachVolume", "AttachmentLimitExceeded")
	r.ObserveThrottle("DescribeVolumes")
	rw := httptest.NewRecorder()
	r.Handler().ServeHTTP(rw, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	body := rw.Body.Bytes()
	for _, want := range []string{
		`aws_ebs_csi_api_request_duration_seconds_count{request="CreateVolume"} 1`,
		`aws_ebs_csi_api_request_errors_total{code="AttachmentLimitExceeded",request="AttachVolume"} 1`,
		`aws_ebs_csi_api_request_throttles_total{operation_name="DescribeVolumes"} 1`,
		// Series of every known operation from the start, as upstream.
		`aws_ebs_csi_api_request_duration_seconds_count{request="EnableFastSnapshotRestores"} 0`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("missing %s", want)
		}
	}
}

// --deprecated-metrics: every attempt also under upstream's former names, with the same labels; without it,
// none of them.
func TestRecorderServesDeprecatedNamesWhenAsked(t *testing.T) {
	scrape := func(r *Recorder) string {
		r.ObserveSuccess("CreateVolume", 20*time.Millisecond)
		r.ObserveError("AttachVolume", "AttachmentLimitExceeded")
		r.ObserveThrottle("DescribeVolumes")
		rw := httptest.NewRecorder()
		r.Handler().ServeHTTP(rw, httptest.NewRequest(http.MethodGet, "/metrics", nil))
		return rw.Body.String()
	}
	deprecated := []string{
		`cloudprovider_aws_api_request_duration_seconds_count{request="CreateVolume"} 1`,
		`cloudprovider_aws_api_request_errors{code="AttachmentLimitExceeded",request="AttachVolume"} 1`,
		`cloudprovider_aws_api_throttled_requests_total{operation_name="DescribeVolumes"} 1`,
		`cloudprovider_aws_api_request_duration_seconds_count{request="EnableFastSnapshotRestores"} 0`,
	}
	if body := scrape(New()); strings.Contains(body, "cloudprovider_aws_") {
		t.Errorf("deprecated series served without EmitDeprecated:\n%s", body)
	}
	r := New()
	r.EmitDeprecated()
	body := scrape(r)
	for _, want := range append(deprecated, `aws_ebs_csi_api_request_duration_seconds_count{request="CreateVolume"} 1`) {
		if !strings.Contains(body, want) {
			t.Errorf("missing %s", want)
		}
	}
}
