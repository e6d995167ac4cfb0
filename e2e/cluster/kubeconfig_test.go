package cluster

import (
	"bytes"
	"path/filepath"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
)

func TestWriteKubeconfigRoundTrips(t *testing.T) {
	ca := []byte("-----BEGIN CERTIFICATE-----\nca\n-----END CERTIFICATE-----\n")
	tests := []struct {
		name  string
		creds credentials
	}{
		{name: "client certificate", creds: credentials{certPEM: []byte("cert"), keyPEM: []byte("key")}},
		{name: "bearer token", creds: credentials{token: "a.b.c"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "kubeconfig")
			if err := writeKubeconfig(path, "https://127.0.0.1:6443", ca, "someone", tt.creds); err != nil {
				t.Fatal(err)
			}
			cfg, err := clientcmd.BuildConfigFromFlags("", path)
			if err != nil {
				t.Fatalf("load: %v", err)
			}
			if cfg.Host != "https://127.0.0.1:6443" {
				t.Errorf("Host = %q", cfg.Host)
			}
			if !bytes.Equal(cfg.CAData, ca) {
				t.Errorf("CAData = %q, want %q", cfg.CAData, ca)
			}
			if !bytes.Equal(cfg.CertData, tt.creds.certPEM) || !bytes.Equal(cfg.KeyData, tt.creds.keyPEM) {
				t.Errorf("client cert/key = %q/%q, want %q/%q", cfg.CertData, cfg.KeyData, tt.creds.certPEM, tt.creds.keyPEM)
			}
			if cfg.BearerToken != tt.creds.token {
				t.Errorf("BearerToken = %q, want %q", cfg.BearerToken, tt.creds.token)
			}
		})
	}
}
