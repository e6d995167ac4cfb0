package ec2sim

import (
	"context"
	"io"
	"net"
	"net/http"
	"testing"

	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
)

// TestSharedIMDSAnswersEachCallerAsItsInstance calls the shared endpoint from two loopback addresses, each
// one instance's Callers, and from a third that is no instance's.
func TestSharedIMDSAnswersEachCallerAsItsInstance(t *testing.T) {
	s := startServer(t, func(c *Config) {
		c.IMDSListen = "127.0.0.1:0"
		c.Instances[0].Callers = &net.IPNet{IP: net.IPv4(127, 0, 0, 1), Mask: net.CIDRMask(32, 32)}
		c.Instances[1].Callers = &net.IPNet{IP: net.IPv4(127, 0, 0, 2), Mask: net.CIDRMask(32, 32)}
	})
	if s.SharedIMDSURL() == "" {
		t.Fatal("SharedIMDSURL is empty with IMDSListen set")
	}
	from := func(ip net.IP) *http.Client {
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: ip}}
		return &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}
	}
	ctx := ctxT(t)
	instanceID := func(ip net.IP) (string, error) {
		c := imds.New(imds.Options{Endpoint: s.SharedIMDSURL(), HTTPClient: from(ip)})
		out, err := c.GetMetadata(ctx, &imds.GetMetadataInput{Path: "instance-id"})
		if err != nil {
			return "", err
		}
		defer out.Content.Close()
		b, err := io.ReadAll(out.Content)
		return string(b), err
	}
	for ip, want := range map[string]string{"127.0.0.1": testInstance, "127.0.0.2": testInstance2} {
		got, err := instanceID(net.ParseIP(ip))
		if err != nil || got != want {
			t.Errorf("instance-id from %s = %q, %v; want %q", ip, got, err, want)
		}
	}
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPut, s.SharedIMDSURL()+"/latest/api/token", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-aws-ec2-metadata-token-ttl-seconds", "60")
	resp, err := from(net.IPv4(127, 0, 0, 3)).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("a token for an address that is no instance's: status %d, want 403", resp.StatusCode)
	}
}
