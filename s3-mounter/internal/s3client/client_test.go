package s3client

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// isolate points the AWS configuration chain at nothing but the given environment.
func isolate(t *testing.T, env map[string]string) {
	t.Helper()
	empty := filepath.Join(t.TempDir(), "none")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"AWS_PROFILE", "AWS_CA_BUNDLE", "AWS_ROLE_ARN", "AWS_WEB_IDENTITY_TOKEN_FILE",
		"AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", "AWS_SESSION_TOKEN",
		"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_MAX_ATTEMPTS", "AWS_REGION", "AWS_DEFAULT_REGION"} {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
	t.Setenv("AWS_CONFIG_FILE", empty)
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", empty)
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	for k, v := range env {
		t.Setenv(k, v)
	}
}

// recorder is an S3 endpoint that answers HeadBucket with the given statuses in turn (then 200) and
// records the requests.
type recorder struct {
	mu       sync.Mutex
	statuses []int
	requests []*http.Request
}

func (r *recorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	r.requests = append(r.requests, req.Clone(context.Background()))
	status := http.StatusOK
	if len(r.statuses) > 0 {
		status, r.statuses = r.statuses[0], r.statuses[1:]
	}
	r.mu.Unlock()
	w.WriteHeader(status)
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.requests)
}

func newTestClient(t *testing.T, rec *recorder, o Options) *Client {
	t.Helper()
	srv := httptest.NewServer(rec)
	t.Cleanup(srv.Close)
	o.Bucket, o.EndpointURL, o.ForcePathStyle = "bkt", srv.URL, true
	c, err := New(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestThrottlingAndServerErrorsAreRetried(t *testing.T) {
	isolate(t, map[string]string{"AWS_ACCESS_KEY_ID": "AK", "AWS_SECRET_ACCESS_KEY": "SK", "AWS_REGION": "us-east-1"})
	rec := &recorder{statuses: []int{503, 500, 503}}
	c := newTestClient(t, rec, Options{})
	if err := c.listEmpty(context.Background(), ""); err != nil {
		t.Fatalf("HeadBucket after three retryable failures: %v", err)
	}
	if rec.count() != 4 {
		t.Errorf("%d requests, want 4 (three retried failures, then success)", rec.count())
	}
}

func TestAWSMaxAttemptsBoundsRetries(t *testing.T) {
	isolate(t, map[string]string{"AWS_ACCESS_KEY_ID": "AK", "AWS_SECRET_ACCESS_KEY": "SK", "AWS_REGION": "us-east-1", "AWS_MAX_ATTEMPTS": "2"})
	rec := &recorder{statuses: []int{503, 503, 503, 503}}
	c := newTestClient(t, rec, Options{})
	err := c.listEmpty(context.Background(), "")
	if err == nil {
		t.Fatal("HeadBucket succeeded although every attempt failed")
	}
	if rec.count() != 2 {
		t.Errorf("%d requests with AWS_MAX_ATTEMPTS=2", rec.count())
	}
	if got := ToErrno(err); got != syscall.EAGAIN {
		t.Errorf("errno %v after retries of 503, want EAGAIN", got)
	}
}

func TestCredentialsComeFromTheSharedFilesAndProfile(t *testing.T) {
	dir := t.TempDir()
	creds := filepath.Join(dir, "credentials")
	if err := os.WriteFile(creds, []byte("[csi]\naws_access_key_id = AKFROMFILE\naws_secret_access_key = secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	isolate(t, map[string]string{"AWS_REGION": "eu-west-1"})
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", creds)
	t.Setenv("AWS_PROFILE", "csi")
	rec := &recorder{}
	c := newTestClient(t, rec, Options{UserAgentPrefix: "s3-csi-driver/2.0"})
	if err := c.listEmpty(context.Background(), ""); err != nil {
		t.Fatal(err)
	}
	req := rec.requests[0]
	auth := req.Header.Get("Authorization")
	if !strings.Contains(auth, "Credential=AKFROMFILE/") || !strings.Contains(auth, "/eu-west-1/s3/") {
		t.Errorf("Authorization %q: want the profile's key and the region", auth)
	}
	if ua := req.Header.Get("User-Agent"); !strings.HasPrefix(ua, "s3-csi-driver/2.0 ") {
		t.Errorf("User-Agent %q: want the --user-agent-prefix first", ua)
	}
	if req.URL.Path != "/bkt" {
		t.Errorf("path %q: want path-style /bkt", req.URL.Path)
	}
}

func TestNoSignRequestSendsNoSignature(t *testing.T) {
	isolate(t, map[string]string{"AWS_ACCESS_KEY_ID": "AK", "AWS_SECRET_ACCESS_KEY": "SK", "AWS_REGION": "us-east-1"})
	rec := &recorder{}
	c := newTestClient(t, rec, Options{NoSignRequest: true})
	if err := c.listEmpty(context.Background(), ""); err != nil {
		t.Fatal(err)
	}
	if auth := rec.requests[0].Header.Get("Authorization"); auth != "" {
		t.Errorf("--no-sign-request sent Authorization %q", auth)
	}
}
