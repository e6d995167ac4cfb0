// Package options parses mount-s3's command line into a Config, so a Mountpoint pod (or a user) can run
// s3-fuse with the arguments it would give AWS's mount-s3.
package options

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

const (
	// DefaultPartSize is mount-s3's default for --part-size, --read-part-size and --write-part-size.
	DefaultPartSize = 8 << 20
	// DefaultMaxThreads is mount-s3's default for --max-threads.
	DefaultMaxThreads = 16
	// DefaultMetadataTTL is how long lookups are trusted when --metadata-ttl is not given (Mountpoint
	// documents that metadata may be stale for up to 1 second).
	DefaultMetadataTTL = time.Second
	// IndefiniteTTL stands for --metadata-ttl indefinite.
	IndefiniteTTL = time.Duration(math.MaxInt64)
	// minPartSize and maxPartSize are S3's multipart limits (5 MiB .. 5 GiB).
	minPartSize = 5 << 20
	maxPartSize = 5 << 30
)

// Config is the parsed command line.
type Config struct {
	Bucket     string
	MountPoint string

	Prefix         string
	Region         string
	EndpointURL    string
	ForcePathStyle bool
	NoSignRequest  bool

	ReadOnly       bool
	AllowDelete    bool
	AllowOverwrite bool
	AllowOther     bool
	AllowRoot      bool
	Foreground     bool
	Debug          bool

	UID, GID          uint32
	UIDSet, GIDSet    bool
	DirMode, FileMode uint32

	MetadataTTL     time.Duration
	MinimalTTL      bool
	CacheDir        string
	MaxCacheSizeMiB int64

	ReadPartSize  int64
	WritePartSize int64
	MaxThreads    int
	// MaximumThroughputGbps caps object data moved to and from S3; 0 means not given (no cap).
	MaximumThroughputGbps float64

	StorageClass    string
	SSE             string
	SSEKMSKeyID     string
	UserAgentPrefix string

	// Options of mount-s3 1.2x beyond the ones above (shared/mountpointopts lists them all).
	TransferAcceleration bool
	DualStack            bool
	RequesterPays        bool
	ExpectedBucketOwner  string
	// BucketType is "", "general-purpose" or "directory".
	BucketType string
	// UploadChecksums is "" (crc32c, or off for an S3 on Outposts bucket, as mount-s3), "crc32c" or "off".
	UploadChecksums   string
	Profile           string
	IncrementalUpload bool
	AutoUnmount       bool
	Bind              []string
	// NegativeMetadataTTL is how long the kernel may remember that a name does not exist.
	NegativeMetadataTTL    time.Duration
	NegativeMetadataTTLSet bool
	CacheXZ                string

	LogDirectory       string
	LogMetrics         bool
	DebugCRT           bool
	NoLog              bool
	OTLPEndpoint       string
	OTLPExportInterval int

	// CheckArgs (hidden --check-args) parses and validates, then exits without mounting.
	CheckArgs   bool
	ShowHelp    bool
	ShowVersion bool

	// given holds the long names of the options on the command line.
	given map[string]bool

	// Warnings name the options accepted without their full effect, one line each, for the caller to log.
	Warnings []string
}

// ErrUsage marks errors caused by the command line itself.
var ErrUsage = errors.New("usage")

// Parse reads args (without the program name) the way mount-s3's clap parser does: `--k=v`, `--k v`
// and bare `--k` for switches, options and positionals in any order, `--` ending options.
func Parse(args []string) (*Config, error) {
	c := &Config{
		DirMode:       0o755,
		FileMode:      0o644,
		MetadataTTL:   DefaultMetadataTTL,
		ReadPartSize:  DefaultPartSize,
		WritePartSize: DefaultPartSize,
		MaxThreads:    DefaultMaxThreads,
	}
	table := specs()
	shorts := shortNames()
	var positional []string
	seen := map[string]bool{}
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			positional = append(positional, args[i+1:]...)
			i = len(args)
			continue
		case strings.HasPrefix(a, "--"):
		case strings.HasPrefix(a, "-") && len(a) > 1:
			long, ok := shorts[a[1:]]
			if !ok {
				return nil, fmt.Errorf("%w: unknown option %q", ErrUsage, a)
			}
			a = "--" + long
		default:
			positional = append(positional, a)
			continue
		}
		name, value, hasValue := strings.Cut(a[2:], "=")
		s, ok := table[name]
		if !ok {
			return nil, fmt.Errorf("%w: unknown option --%s", ErrUsage, name)
		}
		if seen[name] && !s.repeat {
			return nil, fmt.Errorf("%w: --%s given more than once", ErrUsage, name)
		}
		seen[name] = true
		if s.kind == flagBool {
			if hasValue {
				return nil, fmt.Errorf("%w: --%s takes no value", ErrUsage, name)
			}
		} else if !hasValue {
			// Like clap, a following option is not taken as the value: "--region --debug" lacks one.
			if i+1 >= len(args) || (strings.HasPrefix(args[i+1], "-") && len(args[i+1]) > 1) {
				return nil, fmt.Errorf("%w: --%s needs a value", ErrUsage, name)
			}
			i++
			value = args[i]
		}
		if err := s.apply(c, value); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrUsage, err)
		}
	}
	c.given = seen
	if c.ShowHelp || c.ShowVersion {
		return c, nil
	}
	if len(positional) != 2 {
		return nil, fmt.Errorf("%w: want <bucket> <mountpoint>, got %d positional arguments", ErrUsage, len(positional))
	}
	c.Bucket, c.MountPoint = positional[0], positional[1]
	if err := c.bucketFromURI(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUsage, err)
	}
	if err := c.validate(); err != nil {
		return nil, err
	}
	c.Warnings = c.warnings()
	return c, nil
}

// IsFDMount reports whether the mountpoint is an already mounted FUSE fd handed over as /dev/fd/N.
func (c *Config) IsFDMount() bool {
	n, ok := strings.CutPrefix(c.MountPoint, "/dev/fd/")
	if !ok {
		return false
	}
	_, err := strconv.ParseUint(n, 10, 31)
	return err == nil
}

// validBucket applies mount-s3's check (3-255 of letters, digits, '.', '-' and '_', or an ARN): not S3's
// full naming rules, just enough to catch a path or a URI given in place of the bucket.
func validBucket(b string) error {
	if strings.HasPrefix(b, "arn:") {
		return nil
	}
	if len(b) < 3 || len(b) > 255 {
		return fmt.Errorf("bucket %q: want 3 to 255 characters", b)
	}
	for _, r := range b {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-' || r == '_') {
			return fmt.Errorf("bucket %q: invalid character %q", b, r)
		}
	}
	return nil
}

// Usage is the help text.
const Usage = `usage: s3-fuse [options] <bucket> <mountpoint>

Mounts an S3 bucket with Mountpoint's semantics; accepts mount-s3's options.
<mountpoint> may be /dev/fd/N, a FUSE fd already mounted by a privileged parent.

  --prefix P                 mount only keys under P (must end with /)
  --region R                 AWS region (default: from the environment, else us-east-1)
  --endpoint-url URL         S3 endpoint, for S3-compatible servers
  --force-path-style         path-style addressing (bucket in the path)
  --no-sign-request          anonymous requests
  --read-only                mount read-only
  --allow-delete             allow unlink
  --allow-overwrite          allow replacing existing files (open with O_TRUNC)
  --allow-other, --allow-root  let other users (or root) access the mount
  --uid N, --gid N           owner of files and directories
  --dir-mode OCT, --file-mode OCT  permission bits (default 755, 644)
  --metadata-ttl S|indefinite|minimal  how long metadata is trusted (default 1 s)
  --cache DIR, --max-cache-size MiB  local cache of object data
  --part-size B, --read-part-size B, --write-part-size B  request sizes (default 8 MiB)
  --max-threads N            concurrent S3 requests (default 16)
  --maximum-throughput-gbps G  cap on S3 transfers, in Gbit/s (default: none)
  --storage-class C, --sse AES256|aws:kms|aws:kms:dsse, --sse-kms-key-id K  for new objects
  --user-agent-prefix S      prefix of the HTTP User-Agent
  --transfer-acceleration, --dual-stack  endpoint choice when --endpoint-url is not given
  --requester-pays, --expected-bucket-owner ID  request headers
  --upload-checksums crc32c|off  checksums of uploads (default crc32c)
  --negative-metadata-ttl S|indefinite|minimal  how long a missing name is remembered (default 0)
  --profile P                credentials profile
  --bind IFACE               network interface for S3 connections (repeatable)
  -l, --log-directory DIR    write logs to a file in DIR; --no-log disables logging
  --log-metrics              log request counts every 5 s
  --bucket-type, --incremental-upload, --cache-xz, --auto-unmount, --debug-crt, --otlp-endpoint,
  --otlp-export-interval     accepted; see the README for what s3-fuse does with each
  -f, --foreground           stay in the foreground
  -d, --debug                verbose logs
Environment: AWS_MAX_ATTEMPTS and the standard AWS credential chain.
`
