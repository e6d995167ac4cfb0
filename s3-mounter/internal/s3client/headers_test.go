package s3client

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestOptionsShapeRequests checks the request headers and checksums that Mountpoint's options set, on
// the wire, as a server receives them.
func TestOptionsShapeRequests(t *testing.T) {
	tests := []struct {
		name   string
		opts   Options
		header string
		want   string
	}{
		{"requester pays", Options{RequesterPays: true}, "X-Amz-Request-Payer", "requester"},
		{"expected bucket owner", Options{ExpectedBucketOwner: "111122223333"}, "X-Amz-Expected-Bucket-Owner", "111122223333"},
		{"no headers by default", Options{}, "X-Amz-Request-Payer", ""},
		{"crc32c by default", Options{}, "X-Amz-Checksum-Crc32c", "AAAAAA=="},
		{"upload checksums off", Options{NoUploadChecksums: true}, "X-Amz-Checksum-Crc32c", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			isolate(t, map[string]string{"AWS_ACCESS_KEY_ID": "a", "AWS_SECRET_ACCESS_KEY": "s"})
			rec := &recorder{}
			srv := httptest.NewServer(rec)
			defer srv.Close()
			o := tt.opts
			o.Bucket, o.EndpointURL, o.ForcePathStyle = "b1b", srv.URL, true
			c, err := New(context.Background(), o)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.Put(context.Background(), "k", nil, 0); err != nil {
				t.Fatal(err)
			}
			req := rec.requests[0]
			if got := req.Header.Get(tt.header); got != tt.want {
				t.Fatalf("%s = %q, want %q", tt.header, got, tt.want)
			}
			if tt.want != "" && !strings.Contains(strings.ToLower(req.Header.Get("Authorization")), strings.ToLower(tt.header)) {
				t.Fatalf("%s is not signed: %s", tt.header, req.Header.Get("Authorization"))
			}
		})
	}
}

func TestBindRefusesAnUnknownInterface(t *testing.T) {
	isolate(t, nil)
	_, err := New(context.Background(), Options{Bucket: "b1b", Bind: []string{"no-such-if0"}})
	if err == nil || !strings.Contains(err.Error(), "--bind no-such-if0") {
		t.Fatalf("New = %v, want an error naming --bind no-such-if0", err)
	}
}

func TestBindUsesTheInterface(t *testing.T) {
	isolate(t, map[string]string{"AWS_ACCESS_KEY_ID": "a", "AWS_SECRET_ACCESS_KEY": "s"})
	rec := &recorder{}
	srv := httptest.NewServer(rec)
	defer srv.Close()
	c, err := New(context.Background(), Options{Bucket: "b1b", EndpointURL: srv.URL, ForcePathStyle: true, Bind: []string{"lo"}})
	if err != nil {
		t.Fatal(err)
	}
	// Binding to lo needs CAP_NET_RAW before Linux 5.7; either way the request reaches 127.0.0.1 or
	// fails naming the interface.
	if err := c.listEmpty(context.Background(), ""); err != nil && !strings.Contains(err.Error(), "bind to interface lo") {
		t.Fatalf("HeadBucket: %v", err)
	}
}
