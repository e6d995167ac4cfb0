package ec2sim

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
)

func TestIMDSAnswersTheSDKClient(t *testing.T) {
	s := startServer(t, nil)
	c := imds.New(imds.Options{Endpoint: s.IMDSURL(testInstance)})
	ctx := ctxT(t)

	get := func(path string) string {
		t.Helper()
		out, err := c.GetMetadata(ctx, &imds.GetMetadataInput{Path: path})
		if err != nil {
			t.Fatalf("GetMetadata %s: %v", path, err)
		}
		defer out.Content.Close()
		b, err := io.ReadAll(out.Content)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	for path, want := range map[string]string{
		"instance-id":                 testInstance,
		"instance-type":               "m5.large",
		"placement/availability-zone": testZone,
		"placement/region":            "us-east-1",
		"block-device-mapping/":       "ami\nroot",
		"block-device-mapping":        "ami\nroot",
		"block-device-mapping/root":   "/dev/xvda",
	} {
		if got := get(path); got != want {
			t.Errorf("%s = %q, want %q", path, got, want)
		}
	}
	macs := get("network/interfaces/macs/")
	if lines := strings.Split(macs, "\n"); len(lines) != 1 || !strings.HasSuffix(lines[0], "/") {
		t.Errorf("network/interfaces/macs/ = %q, want one MAC directory", macs)
	}
	if got := get("network/interfaces/macs/" + macs + "mac"); got+"/" != macs {
		t.Errorf("mac = %q, listed %q", got, macs)
	}
	doc, err := c.GetInstanceIdentityDocument(ctx, &imds.GetInstanceIdentityDocumentInput{})
	if err != nil {
		t.Fatalf("GetInstanceIdentityDocument: %v", err)
	}
	if doc.InstanceID != testInstance || doc.Region != "us-east-1" || doc.AvailabilityZone != testZone || doc.InstanceType != "m5.large" {
		t.Errorf("identity document %+v", doc)
	}
	region, err := c.GetRegion(ctx, &imds.GetRegionInput{})
	if err != nil || region.Region != "us-east-1" {
		t.Errorf("GetRegion = %+v, %v", region, err)
	}
	if _, err := c.GetMetadata(ctx, &imds.GetMetadataInput{Path: "no-such-thing"}); err == nil {
		t.Error("unknown path answered")
	}
	if s.IMDSURL("i-unknown") != "" {
		t.Error("IMDS URL for an unknown instance")
	}
}

func TestIMDSRequiresAToken(t *testing.T) {
	s := startServer(t, nil)
	base := s.IMDSURL(testInstance2)
	do := func(method, path string, hdr map[string]string) (*http.Response, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(ctxT(t), method, base+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	if resp, _ := do(http.MethodGet, "/latest/meta-data/instance-id", nil); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("without token: %d, want 401", resp.StatusCode)
	}
	if resp, _ := do(http.MethodPut, "/latest/api/token", nil); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("token without TTL: %d, want 400", resp.StatusCode)
	}
	if resp, _ := do(http.MethodGet, "/latest/meta-data/instance-id", map[string]string{"X-aws-ec2-metadata-token": "forged"}); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("forged token: %d, want 401", resp.StatusCode)
	}
	resp, tok := do(http.MethodPut, "/latest/api/token", map[string]string{"X-aws-ec2-metadata-token-ttl-seconds": "60"})
	if resp.StatusCode != http.StatusOK || tok == "" || resp.Header.Get("X-Aws-Ec2-Metadata-Token-Ttl-Seconds") != "60" {
		t.Fatalf("token: %d %q", resp.StatusCode, tok)
	}
	resp, body := do(http.MethodGet, "/latest/meta-data/placement/availability-zone", map[string]string{"X-aws-ec2-metadata-token": tok})
	if resp.StatusCode != http.StatusOK || body != "us-east-1b" {
		t.Errorf("zone with token: %d %q", resp.StatusCode, body)
	}
}
