package httpserver

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// selfSigned writes a self-signed certificate for 127.0.0.1 and its key to PEM files in dir, and returns
// their paths and a pool that trusts the certificate.
func selfSigned(t *testing.T, dir string) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "httpserver test"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}

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
	certFile, keyFile, pool := selfSigned(t, t.TempDir())
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
	dir := t.TempDir()
	certFile, keyFile, _ := selfSigned(t, dir)
	otherCert, _, _ := selfSigned(t, t.TempDir())
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
