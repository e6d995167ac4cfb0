package cluster

import (
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"slices"
	"testing"

	"k8s.io/client-go/util/keyutil"
)

func TestIssuedCertificatesVerifyAgainstTheCA(t *testing.T) {
	ca, err := newCA("test-ca")
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)

	serving, err := ca.issue(servingSpec(nil))
	if err != nil {
		t.Fatal(err)
	}
	admin, err := ca.issue(certSpec{commonName: "admin", orgs: []string{"system:masters"},
		usages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	if err != nil {
		t.Fatal(err)
	}

	for _, host := range []string{"127.0.0.1", "localhost"} {
		_, err := serving.cert.Verify(x509.VerifyOptions{DNSName: host, Roots: pool,
			KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
		if err != nil {
			t.Errorf("serving certificate does not verify for %s: %v", host, err)
		}
	}
	if _, err := serving.cert.Verify(x509.VerifyOptions{DNSName: "example.com", Roots: pool}); err == nil {
		t.Error("serving certificate verifies for example.com, want only loopback names")
	}
	if _, err := admin.cert.Verify(x509.VerifyOptions{Roots: pool,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("client certificate does not verify: %v", err)
	}
	if !slices.Equal(admin.cert.Subject.Organization, []string{"system:masters"}) {
		t.Errorf("client certificate groups = %v, want [system:masters]", admin.cert.Subject.Organization)
	}
	if _, err := admin.cert.Verify(x509.VerifyOptions{Roots: x509.NewCertPool(),
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err == nil {
		t.Error("client certificate verifies against an empty pool")
	}
}

func TestKeyPairPEMLoadsAsTLSCertificate(t *testing.T) {
	ca, err := newCA("test-ca")
	if err != nil {
		t.Fatal(err)
	}
	serving, err := ca.issue(servingSpec(nil))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tls.X509KeyPair(serving.certPEM, serving.keyPEM); err != nil {
		t.Fatalf("PEM pair does not load: %v", err)
	}
	block, _ := pem.Decode(ca.certPEM)
	if block == nil || block.Type != "CERTIFICATE" {
		t.Fatalf("CA PEM block = %v, want a CERTIFICATE", block)
	}
}

func TestSigningKeyPairMatches(t *testing.T) {
	privPEM, pubPEM, err := newSigningKey()
	if err != nil {
		t.Fatal(err)
	}
	// Parse with the same helpers kube-apiserver uses for its key files.
	priv, err := keyutil.ParsePrivateKeyPEM(privPEM)
	if err != nil {
		t.Fatalf("private key: %v", err)
	}
	pubs, err := keyutil.ParsePublicKeysPEM(pubPEM)
	if err != nil || len(pubs) != 1 {
		t.Fatalf("public keys = %d, %v; want one", len(pubs), err)
	}
	signer, ok := priv.(crypto.Signer)
	if !ok {
		t.Fatalf("private key %T has no public key", priv)
	}
	if eq, ok := pubs[0].(interface{ Equal(crypto.PublicKey) bool }); !ok || !eq.Equal(signer.Public()) {
		t.Error("public key file does not match the private key")
	}
}
