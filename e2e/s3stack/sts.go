package s3stack

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"

	"github.com/stowage-csi/stowage/e2e/stssim"
)

// serviceAccountIssuer is the rig API server's --service-account-issuer (e2e/cluster).
const serviceAccountIssuer = "https://kubernetes.default.svc"

// startSTS runs the STS stand-in (Options.STS) with the API server's ServiceAccount issuer keys.
func (s *Stack) startSTS(ctx context.Context) error {
	jwks, err := stssim.FetchJWKS(ctx, s.Client.CoreV1().RESTClient())
	if err != nil {
		return err
	}
	keys, err := stssim.ParseJWKS(jwks)
	if err != nil {
		return err
	}
	s.STS = stssim.New(stssim.Config{Keys: keys, Issuer: serviceAccountIssuer})
	if s.stsListener, err = stssim.Listen(s.STS); err != nil {
		return fmt.Errorf("start the STS stand-in: %w", err)
	}
	s.STSEndpoint = s.stsListener.URL
	return nil
}

// stsNodeEnv is what s3-node gets with Options.STS: the operator-set endpoints it passes to Mountpoint, so
// that the SDK's web identity provider in s3-fuse asks the stand-in, and volumes without an endpoint-url
// mount option (inline volumes have no mount options) reach the S3 server.
func (s *Stack) stsNodeEnv() []string {
	if s.STS == nil {
		return nil
	}
	return []string{"AWS_ENDPOINT_URL_STS=" + s.STSEndpoint, "AWS_ENDPOINT_URL_S3=" + s.S3.Endpoint}
}

// AddRole makes a role the given ServiceAccounts ("<namespace>/<name>") may assume: its sessions act as a
// new S3 server account that owns bucket (created here) and nothing else.
func (s *Stack) AddRole(ctx context.Context, roleARN, bucket string, serviceAccounts ...string) error {
	if s.STS == nil {
		return fmt.Errorf("AddRole needs Options.STS")
	}
	access, secret := "AKROLE"+randomHex(6), randomHex(20)
	if err := s.S3.AddUser(ctx, access, secret); err != nil {
		return err
	}
	if err := s.S3.CreateBucketFor(ctx, bucket, access); err != nil {
		return err
	}
	s.STS.SetRole(stssim.Role{ARN: roleARN, ServiceAccounts: serviceAccounts, AccessKeyID: access, SecretAccessKey: secret})
	return nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
