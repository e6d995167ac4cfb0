package s3server

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/stowage-csi/stowage/e2e/rig"
)

// Region is what the server and clients agree on.
const Region = "us-east-1"

// Server is a running versitygw.
type Server struct {
	Endpoint  string
	AccessKey string
	SecretKey string
	// DataDir holds one directory per bucket, objects as plain files.
	DataDir string
	// Client is an SDK client for the server (path style, static keys, unaffected by AWS_CA_BUNDLE).
	Client *s3.Client

	proc *rig.Process
}

// Start builds (if needed) and starts versitygw on a free loopback port; t.Cleanup stops it.
func Start(t testing.TB) *Server {
	t.Helper()
	return StartOn(t, "127.0.0.1")
}

// StartOn is Start listening on host instead of loopback: on real nodes Pods reach the host only through
// their network's gateway address.
func StartOn(t testing.TB, host string) *Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	bin, err := Binary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s, err := start(bin, t.TempDir(), host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s
}

// StartIn builds (if needed) and starts versitygw with its data and log under dir, for callers that are not
// tests (the demo); Stop ends it.
func StartIn(ctx context.Context, dir string) (*Server, error) {
	return StartInOn(ctx, dir, "127.0.0.1")
}

// StartInOn is StartIn listening on host: an install on real nodes, whose Pods reach the host only through
// their network's gateway, starts it there without a test.
func StartInOn(ctx context.Context, dir, host string) (*Server, error) {
	bin, err := Binary(ctx)
	if err != nil {
		return nil, err
	}
	return start(bin, dir, host)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func freePort(host string) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// start runs versitygw on host; extra are global flags before the backend (e.g. --iam-dir).
func start(bin, dir, host string, extra ...string) (*Server, error) {
	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		return nil, err
	}
	var lastErr error
	// The port is free when chosen but could be taken before versitygw binds it; try a few.
	for attempt := 0; attempt < 3; attempt++ {
		port, err := freePort(host)
		if err != nil {
			return nil, err
		}
		s := &Server{
			Endpoint:  "http://" + net.JoinHostPort(host, strconv.Itoa(port)),
			AccessKey: "AK" + randomHex(8),
			SecretKey: randomHex(20),
			DataDir:   data,
		}
		// Each attempt's log replaces the last one's: an error shows why this attempt failed.
		args := append([]string{"--access", s.AccessKey, "--secret", s.SecretKey, "--port", net.JoinHostPort(host, strconv.Itoa(port)), "--quiet"}, extra...)
		s.proc, err = rig.Start(rig.Spec{Name: "versitygw", Path: bin, Args: append(args, "posix", data),
			Env: cleanEnv(os.Environ()), LogDir: dir})
		if err != nil {
			return nil, err
		}
		if err := waitPort(host, port, s.proc.Done()); err != nil {
			s.Stop()
			lastErr = fmt.Errorf("versitygw did not start: %w\n%s", err, s.proc.Tail(100))
			continue
		}
		s.Client = s.NewClient()
		return s, nil
	}
	return nil, lastErr
}

// waitPort waits until the server accepts connections on port, and gives up at once if it has exited.
// It polls with the primitive rig.Eventually uses, which returns an error instead of failing a test, as
// start retries on another port.
func waitPort(host string, port int, exited <-chan struct{}) error {
	var lastErr error
	err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		select {
		case <-exited:
			return false, errors.New("process exited")
		default:
		}
		c, err := net.DialTimeout("tcp", net.JoinHostPort(host, strconv.Itoa(port)), time.Second)
		if err != nil {
			lastErr = err
			return false, nil
		}
		_ = c.Close()
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("port %d not open: %w (last dial error: %v)", port, err, lastErr)
	}
	return nil
}

// Stop ends the server (SIGTERM, SIGKILL after 5s) and waits for it.
func (s *Server) Stop() {
	if s.proc != nil {
		s.proc.Stop(5 * time.Second)
	}
}

// NewClient returns an SDK client for the server, built without LoadDefaultConfig so the caller's
// AWS_* environment (AWS_CA_BUNDLE in particular) plays no part.
func (s *Server) NewClient() *s3.Client {
	return s3.New(s3.Options{
		Region:       Region,
		BaseEndpoint: aws.String(s.Endpoint),
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(s.AccessKey, s.SecretKey, ""),
		HTTPClient: &http.Client{Transport: &http.Transport{
			MaxIdleConnsPerHost: 64,
			ReadBufferSize:      256 << 10,
			WriteBufferSize:     256 << 10,
		}},
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired,
	})
}

// Env is the environment for a child process that talks to the server (credentials and region only;
// the parent's AWS_* variables are dropped).
func (s *Server) Env() []string {
	return append(cleanEnv(os.Environ()),
		"AWS_ACCESS_KEY_ID="+s.AccessKey, "AWS_SECRET_ACCESS_KEY="+s.SecretKey,
		"AWS_REGION="+Region, "AWS_EC2_METADATA_DISABLED=true")
}

// CreateBucket makes a bucket.
func (s *Server) CreateBucket(ctx context.Context, name string) error {
	_, err := s.Client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: &name})
	return err
}

// PutObject stores one object.
func (s *Server) PutObject(ctx context.Context, bucket, key string, data []byte) error {
	_, err := s.Client.PutObject(ctx, &s3.PutObjectInput{Bucket: &bucket, Key: &key, Body: bytes.NewReader(data)})
	return err
}

// GetObject reads a whole object.
func (s *Server) GetObject(ctx context.Context, bucket, key string) ([]byte, error) {
	out, err := s.Client.GetObject(ctx, &s3.GetObjectInput{Bucket: &bucket, Key: &key})
	if err != nil {
		return nil, err
	}
	defer out.Body.Close()
	var b bytes.Buffer
	_, err = b.ReadFrom(out.Body)
	return b.Bytes(), err
}

// PutObjects stores keys[i] with content data(i), parallel requests at a time.
func (s *Server) PutObjects(ctx context.Context, bucket string, keys []string, data func(i int) []byte, parallel int) error {
	return rig.Parallel(len(keys), parallel, func(i int) error {
		if err := s.PutObject(ctx, bucket, keys[i], data(i)); err != nil {
			return fmt.Errorf("put %s: %w", keys[i], err)
		}
		return nil
	})
}

// WriteFixture stores an object by writing the file the posix backend would hold (bucket directory,
// key as path), which is much faster than PutObject for thousands of fixtures. The server computes
// what it needs (size, mtime) from the file; such objects carry no stored ETag or metadata.
func (s *Server) WriteFixture(bucket, key string, data []byte) error {
	p := filepath.Join(s.DataDir, bucket, filepath.FromSlash(key))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return os.WriteFile(p, data, 0o644)
}

// ListKeys lists a bucket's keys under prefix ("" for all), sorted.
func (s *Server) ListKeys(ctx context.Context, bucket, prefix string) ([]string, error) {
	var keys []string
	p := s3.NewListObjectsV2Paginator(s.Client, &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String(prefix)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		for _, o := range page.Contents {
			keys = append(keys, aws.ToString(o.Key))
		}
	}
	slices.Sort(keys)
	return keys, nil
}
