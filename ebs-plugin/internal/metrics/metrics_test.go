package metrics

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestRecorderServesUpstreamNames(t *testing.T) {
	r := New()
	r.ObserveRequest("CreateVolume", 20*time.Millisecond, "")
	r.ObserveRequest("AttachVolume", time.Millisecond, "AttachmentLimitExceeded")
	r.ObserveThrottle("DescribeVolumes")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addr, err := r.Serve(ctx, "127.0.0.1:0", "/metrics", "", "")
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, want := range []string{
		`aws_ebs_csi_api_request_duration_seconds_count{request="CreateVolume"} 1`,
		`aws_ebs_csi_api_request_errors_total{code="AttachmentLimitExceeded",request="AttachVolume"} 1`,
		`aws_ebs_csi_api_request_throttles_total{operation_name="DescribeVolumes"} 1`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("missing %s", want)
		}
	}
}
