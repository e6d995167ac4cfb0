package stssim

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"math/big"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/aws/smithy-go"
)

const (
	issuer  = "https://kubernetes.default.svc"
	roleARN = "arn:aws:iam::111122223333:role/reader"
)

var now = time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)

// signer makes tokens the way the API server does (ES256, kid in the header).
type signer struct {
	kid string
	key *ecdsa.PrivateKey
}

func newSigner(t *testing.T, kid string) signer {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return signer{kid: kid, key: key}
}

func (s signer) jwks(t *testing.T) []byte {
	t.Helper()
	b, err := json.Marshal(map[string]any{"keys": []JWK{{Kty: "EC", Kid: s.kid, Alg: "ES256", Crv: "P-256",
		X: base64.RawURLEncoding.EncodeToString(s.key.X.FillBytes(make([]byte, 32))),
		Y: base64.RawURLEncoding.EncodeToString(s.key.Y.FillBytes(make([]byte, 32)))}}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func (s signer) token(t *testing.T, claims map[string]any) string {
	t.Helper()
	h, _ := json.Marshal(map[string]string{"alg": "ES256", "kid": s.kid})
	p, _ := json.Marshal(claims)
	in := base64.RawURLEncoding.EncodeToString(h) + "." + base64.RawURLEncoding.EncodeToString(p)
	d := sha256.Sum256([]byte(in))
	r, sig, err := ecdsa.Sign(rand.Reader, s.key, d[:])
	if err != nil {
		t.Fatal(err)
	}
	return in + "." + base64.RawURLEncoding.EncodeToString(append(r.FillBytes(make([]byte, 32)), sig.FillBytes(make([]byte, 32))...))
}

func claims(sub string, aud any, exp time.Time) map[string]any {
	return map[string]any{"iss": issuer, "sub": sub, "aud": aud, "exp": exp.Unix(), "nbf": now.Add(-time.Minute).Unix()}
}

func newServer(t *testing.T, s signer) (*Server, *sts.Client) {
	t.Helper()
	keys, err := ParseJWKS(s.jwks(t))
	if err != nil {
		t.Fatal(err)
	}
	srv := New(Config{Keys: keys, Issuer: issuer, Now: func() time.Time { return now }})
	srv.SetRole(Role{ARN: roleARN, ServiceAccounts: []string{"apps/reader"}, AccessKeyID: "AKREADER", SecretAccessKey: "secret-reader"})
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	client := sts.New(sts.Options{Region: "us-east-1", BaseEndpoint: aws.String(hs.URL), Credentials: aws.AnonymousCredentials{}})
	return srv, client
}

// TestAssumeRoleWithWebIdentity drives the stand-in with the AWS SDK's STS client: only a valid token of a
// ServiceAccount the role trusts gets the role's account keys; every other request gets STS's error code.
func TestAssumeRoleWithWebIdentity(t *testing.T) {
	s := newSigner(t, "key-1")
	other := newSigner(t, "key-1") // same kid, other key: a forged signature
	srv, client := newServer(t, s)
	good := claims("system:serviceaccount:apps:reader", []string{Audience}, now.Add(time.Hour))
	for _, tc := range []struct {
		name, role, token, wantCode string
	}{
		{name: "trusted service account", role: roleARN, token: s.token(t, good)},
		{name: "audience as a string", role: roleARN, token: s.token(t, claims("system:serviceaccount:apps:reader", Audience, now.Add(time.Hour)))},
		{name: "service account the role does not trust", role: roleARN, wantCode: "AccessDenied",
			token: s.token(t, claims("system:serviceaccount:apps:writer", []string{Audience}, now.Add(time.Hour)))},
		{name: "same name in another namespace", role: roleARN, wantCode: "AccessDenied",
			token: s.token(t, claims("system:serviceaccount:other:reader", []string{Audience}, now.Add(time.Hour)))},
		{name: "unknown role", role: "arn:aws:iam::111122223333:role/nobody", token: s.token(t, good), wantCode: "AccessDenied"},
		{name: "wrong audience", role: roleARN, wantCode: "InvalidIdentityToken",
			token: s.token(t, claims("system:serviceaccount:apps:reader", []string{"pods.eks.amazonaws.com"}, now.Add(time.Hour)))},
		{name: "expired", role: roleARN, wantCode: "ExpiredTokenException",
			token: s.token(t, claims("system:serviceaccount:apps:reader", []string{Audience}, now.Add(-time.Second)))},
		{name: "forged signature", role: roleARN, token: other.token(t, good), wantCode: "InvalidIdentityToken"},
		{name: "unknown key", role: roleARN, token: newSigner(t, "key-2").token(t, good), wantCode: "InvalidIdentityToken"},
		{name: "not a service account", role: roleARN, wantCode: "InvalidIdentityToken",
			token: s.token(t, claims("admin", []string{Audience}, now.Add(time.Hour)))},
		{name: "other issuer", role: roleARN, wantCode: "InvalidIdentityToken",
			token: s.token(t, map[string]any{"iss": "https://evil", "sub": "system:serviceaccount:apps:reader", "aud": Audience, "exp": now.Add(time.Hour).Unix()})},
		{name: "not a JWT", role: roleARN, token: "abc", wantCode: "InvalidIdentityToken"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := client.AssumeRoleWithWebIdentity(context.Background(), &sts.AssumeRoleWithWebIdentityInput{
				RoleArn: aws.String(tc.role), RoleSessionName: aws.String("s1"), WebIdentityToken: aws.String(tc.token)})
			if tc.wantCode != "" {
				var apiErr smithy.APIError
				if !errors.As(err, &apiErr) || apiErr.ErrorCode() != tc.wantCode {
					t.Fatalf("err = %v, want STS error %s", err, tc.wantCode)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			c := out.Credentials
			if aws.ToString(c.AccessKeyId) != "AKREADER" || aws.ToString(c.SecretAccessKey) != "secret-reader" ||
				aws.ToString(c.SessionToken) != "" || !c.Expiration.Equal(now.Add(time.Hour)) {
				t.Errorf("credentials %+v", c)
			}
			if got := aws.ToString(out.AssumedRoleUser.Arn); got != "arn:aws:sts::111122223333:assumed-role/reader/s1" {
				t.Errorf("assumed role ARN %s", got)
			}
			if aws.ToString(out.SubjectFromWebIdentityToken) != "system:serviceaccount:apps:reader" {
				t.Errorf("subject %q", aws.ToString(out.SubjectFromWebIdentityToken))
			}
		})
	}
	if srv.Calls("ok") != 2 || srv.Calls("AccessDenied") != 3 {
		t.Errorf("calls ok=%d AccessDenied=%d, want 2 and 3", srv.Calls("ok"), srv.Calls("AccessDenied"))
	}
}

// TestDefaultChainReachesTheStandIn is what s3-fuse does: the SDK's default credential chain with
// AWS_ROLE_ARN, AWS_WEB_IDENTITY_TOKEN_FILE and AWS_ENDPOINT_URL_STS gets the role's keys from the stand-in.
func TestDefaultChainReachesTheStandIn(t *testing.T) {
	s := newSigner(t, "k")
	keys, err := ParseJWKS(s.jwks(t))
	if err != nil {
		t.Fatal(err)
	}
	srv := New(Config{Keys: keys, Issuer: issuer})
	srv.SetRole(Role{ARN: roleARN, ServiceAccounts: []string{"apps/reader"}, AccessKeyID: "AKREADER", SecretAccessKey: "secret-reader"})
	l, err := Listen(srv)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := l.Close(); err != nil {
			t.Error(err)
		}
	}()
	tokenFile := filepath.Join(t.TempDir(), "token")
	tok := s.token(t, map[string]any{"iss": issuer, "sub": "system:serviceaccount:apps:reader", "aud": []string{Audience}, "exp": time.Now().Add(time.Hour).Unix()})
	if err := os.WriteFile(tokenFile, []byte(tok), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_CA_BUNDLE", "AWS_ENDPOINT_URL"} {
		t.Setenv(k, "")
	}
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("AWS_REGION", "us-east-1")
	t.Setenv("AWS_ROLE_ARN", roleARN)
	t.Setenv("AWS_WEB_IDENTITY_TOKEN_FILE", tokenFile)
	t.Setenv("AWS_ENDPOINT_URL_STS", l.URL)
	cfg, err := config.LoadDefaultConfig(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	creds, err := cfg.Credentials.Retrieve(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if creds.AccessKeyID != "AKREADER" || creds.SecretAccessKey != "secret-reader" || creds.Source != "WebIdentityCredentials" {
		t.Errorf("credentials %s/%s from %s", creds.AccessKeyID, creds.SecretAccessKey, creds.Source)
	}
}

// TestVerifyRS256 covers RSA issuer keys (an API server with an RSA service-account key).
func TestVerifyRS256(t *testing.T) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(map[string]any{"keys": []JWK{{Kty: "RSA", Kid: "r", Alg: "RS256",
		N: base64.RawURLEncoding.EncodeToString(key.N.Bytes()), E: base64.RawURLEncoding.EncodeToString(big.NewInt(int64(key.E)).Bytes())}}})
	keys, err := ParseJWKS(b)
	if err != nil {
		t.Fatal(err)
	}
	h, _ := json.Marshal(map[string]string{"alg": "RS256", "kid": "r"})
	p, _ := json.Marshal(claims("system:serviceaccount:a:b", Audience, now.Add(time.Hour)))
	in := base64.RawURLEncoding.EncodeToString(h) + "." + base64.RawURLEncoding.EncodeToString(p)
	d := sha256.Sum256([]byte(in))
	sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, d[:])
	if err != nil {
		t.Fatal(err)
	}
	tok := in + "." + base64.RawURLEncoding.EncodeToString(sig)
	if c, err := Verify(tok, keys, Audience, issuer, now); err != nil || c.Subject != "system:serviceaccount:a:b" {
		t.Fatalf("Verify = %+v, %v", c, err)
	}
	if _, err := Verify(tok[:len(tok)-4]+"AAAA", keys, Audience, issuer, now); err == nil {
		t.Error("a changed signature verified")
	}
}
