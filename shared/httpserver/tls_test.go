package httpserver

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stowage-csi/stowage/shared/testutil"
)

func serve(t *testing.T, s *Server) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
}

func TestListenTLSServesHTTPSOnly(t *testing.T) {
	certFile, keyFile, pool := testutil.SelfSignedCert(t)
	s, err := ListenTLS("127.0.0.1:0", certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	s.HandleCheck("/healthz", func(*http.Request) error { return nil })
	serve(t, s)
	if !strings.HasPrefix(s.URL("/healthz"), "https://") {
		t.Fatalf("URL = %s, want https://", s.URL("/healthz"))
	}

	transport := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}
	defer transport.CloseIdleConnections()
	resp, err := (&http.Client{Transport: transport}).Get(s.URL("/healthz"))
	if err != nil {
		t.Fatalf("HTTPS GET with the certificate trusted: %v", err)
	}
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || string(body) != "ok" || resp.TLS == nil {
		t.Fatalf("HTTPS GET = %d %q (TLS %v), %v", resp.StatusCode, body, resp.TLS != nil, err)
	}

	// A client that does not trust the certificate is refused: the server really presents this one.
	untrusting := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: x509.NewCertPool(), MinVersion: tls.VersionTLS12}}
	defer untrusting.CloseIdleConnections()
	if resp, err := (&http.Client{Transport: untrusting}).Get(s.URL("/healthz")); err == nil {
		_ = resp.Body.Close()
		t.Fatal("HTTPS GET without trusting the certificate succeeded")
	}
	// Plain HTTP gets the server's "HTTP request to an HTTPS server" answer, not the handler's.
	code, body2 := get(t, "http://"+s.Addr().String()+"/healthz")
	if code != http.StatusBadRequest || body2 == "ok" {
		t.Fatalf("plain HTTP GET = %d %q, want 400 from the TLS server", code, body2)
	}
}

func TestListenTLSFailsOnBadFiles(t *testing.T) {
	certFile, keyFile, _ := testutil.SelfSignedCert(t)
	dir := t.TempDir()
	otherCert, _, _ := testutil.SelfSignedCert(t)
	tests := []struct {
		name, cert, key, wantInErr string
	}{
		{"missing key", certFile, filepath.Join(dir, "nope.key"), "nope.key"},
		{"missing certificate", filepath.Join(dir, "nope.crt"), keyFile, "nope.crt"},
		{"key of another certificate", otherCert, keyFile, "private key does not match"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := ListenTLS("127.0.0.1:0", tt.cert, tt.key)
			if err == nil {
				_ = s.listener.Close()
				t.Fatal("ListenTLS succeeded")
			}
			if !strings.Contains(err.Error(), tt.wantInErr) {
				t.Fatalf("error %q does not name %q", err, tt.wantInErr)
			}
		})
	}
}
