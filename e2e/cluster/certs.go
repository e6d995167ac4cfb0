package cluster

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"time"
)

// certValidity is long enough for a devcluster left running, short enough to be obviously a test CA.
const certValidity = 365 * 24 * time.Hour

// keyPair is a certificate with its private key, both also PEM-encoded for files and kubeconfigs.
type keyPair struct {
	cert    *x509.Certificate
	key     *ecdsa.PrivateKey
	certPEM []byte
	keyPEM  []byte
}

// certSpec says who a certificate is for and what it may be used for.
type certSpec struct {
	commonName string
	orgs       []string // Kubernetes reads a client certificate's organizations as its groups
	dnsNames   []string
	ips        []net.IP
	usages     []x509.ExtKeyUsage
}

// newCA creates a self-signed certificate authority.
func newCA(commonName string) (*keyPair, error) {
	key, tmpl, err := newKey(pkix.Name{CommonName: commonName})
	if err != nil {
		return nil, err
	}
	tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign
	tmpl.IsCA = true
	return sign(tmpl, tmpl, key, key)
}

// issue creates a key and a certificate for spec, signed by the CA.
func (ca *keyPair) issue(spec certSpec) (*keyPair, error) {
	key, tmpl, err := newKey(pkix.Name{CommonName: spec.commonName, Organization: spec.orgs})
	if err != nil {
		return nil, err
	}
	tmpl.DNSNames = spec.dnsNames
	tmpl.IPAddresses = spec.ips
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment
	tmpl.ExtKeyUsage = spec.usages
	return sign(tmpl, ca.cert, key, ca.key)
}

// newKey creates a P-256 key and a certificate template for subject with a fresh serial number, valid from an
// hour ago (to tolerate small clock differences) for certValidity.
func newKey(subject pkix.Name) (*ecdsa.PrivateKey, *x509.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generate key for %s: %w", subject.CommonName, err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, nil, fmt.Errorf("generate serial number: %w", err)
	}
	now := time.Now()
	return key, &x509.Certificate{
		SerialNumber:          serial,
		Subject:               subject,
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(certValidity),
		BasicConstraintsValid: true,
	}, nil
}

func sign(tmpl, parent *x509.Certificate, key, parentKey *ecdsa.PrivateKey) (*keyPair, error) {
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		return nil, fmt.Errorf("sign certificate for %s: %w", tmpl.Subject.CommonName, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parse certificate for %s: %w", tmpl.Subject.CommonName, err)
	}
	keyPEM, err := encodeKey(key)
	if err != nil {
		return nil, err
	}
	return &keyPair{
		cert:    cert,
		key:     key,
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyPEM:  keyPEM,
	}, nil
}

// newSigningKey creates the service-account token signing key: the private key for kube-apiserver and
// kube-controller-manager, the public key for kube-apiserver to verify tokens with.
func newSigningKey() (privatePEM, publicPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generate service-account signing key: %w", err)
	}
	privatePEM, err = encodeKey(key)
	if err != nil {
		return nil, nil, err
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return nil, nil, fmt.Errorf("encode service-account public key: %w", err)
	}
	return privatePEM, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), nil
}

func encodeKey(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encode private key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), nil
}
