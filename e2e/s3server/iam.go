package s3server

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// StartInWithIAM is StartIn with versitygw's internal IAM (--iam-dir under dir), so that accounts besides
// the root one can be made (AddUser): an account with the user role reaches only the buckets it owns.
func StartInWithIAM(ctx context.Context, dir string) (*Server, error) {
	bin, err := Binary(ctx)
	if err != nil {
		return nil, err
	}
	iam := filepath.Join(dir, "iam")
	if err := os.MkdirAll(iam, 0o700); err != nil {
		return nil, err
	}
	return start(bin, dir, "127.0.0.1", "--iam-dir", iam)
}

// AddUser creates an account with the user role (needs StartInWithIAM).
func (s *Server) AddUser(ctx context.Context, access, secret string) error {
	return s.admin(ctx, "create-user", "--access", access, "--secret", secret, "--role", "user")
}

// CreateBucketFor creates a bucket owned by the account with access key owner.
func (s *Server) CreateBucketFor(ctx context.Context, bucket, owner string) error {
	return s.admin(ctx, "create-bucket", "--bucket", bucket, "--owner", owner)
}

// admin runs versitygw's admin CLI against the server as its root account.
func (s *Server) admin(ctx context.Context, args ...string) error {
	bin, err := Binary(ctx)
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, bin, append([]string{"admin", "--access", s.AccessKey, "--secret", s.SecretKey,
		"--endpoint-url", s.Endpoint}, args...)...)
	cmd.Env = cleanEnv(os.Environ())
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("versitygw admin %v: %w: %s", args, err, out)
	}
	return nil
}
