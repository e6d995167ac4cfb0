package cloud

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"
)

func TestCheckReachable(t *testing.T) {
	code := "DryRunOperation"
	c, h, _ := newTestCloud(t, false, map[string]func(url.Values) (string, string, string){
		"DescribeAvailabilityZones": func(f url.Values) (string, string, string) {
			if f.Get("DryRun") != "true" {
				return "", "MissingParameter", "want DryRun"
			}
			if code == "" {
				return "<availabilityZoneInfo/>", "", ""
			}
			return "", code, "Request would have succeeded, but DryRun flag is set."
		},
	})
	now := time.Unix(1000, 0)
	c.now = func() time.Time { return now }
	ctx := context.Background()

	code = "UnauthorizedOperation"
	if err := c.CheckReachable(ctx); err == nil || !strings.Contains(err.Error(), "UnauthorizedOperation") {
		t.Fatalf("unauthorized: %v", err)
	}
	if h.count("DescribeAvailabilityZones") != 1 {
		t.Fatalf("the probe call was retried: %d calls", h.count("DescribeAvailabilityZones"))
	}
	code = "RequestLimitExceeded"
	if err := c.CheckReachable(ctx); err == nil {
		t.Fatal("throttled: want an error")
	}
	if h.count("DescribeAvailabilityZones") != 2 {
		t.Fatalf("the probe call was retried: %d calls", h.count("DescribeAvailabilityZones"))
	}
	code = ""
	if err := c.CheckReachable(ctx); err == nil || !strings.Contains(err.Error(), "DryRun") {
		t.Fatalf("DryRun ignored: %v", err)
	}
	code = "DryRunOperation"
	if err := c.CheckReachable(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.CheckReachable(ctx); err != nil || h.count("DescribeAvailabilityZones") != 4 {
		t.Fatalf("success not cached: %v, %d calls", err, h.count("DescribeAvailabilityZones"))
	}
	now = now.Add(ReachableTTL + time.Second)
	code = "UnauthorizedOperation"
	if err := c.CheckReachable(ctx); err == nil || h.count("DescribeAvailabilityZones") != 5 {
		t.Fatalf("after the TTL: %v, %d calls", err, h.count("DescribeAvailabilityZones"))
	}
}
