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
