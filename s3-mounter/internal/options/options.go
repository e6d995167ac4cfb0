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

	ShowHelp    bool
	ShowVersion bool
}

// ErrUsage marks errors caused by the command line itself.
var ErrUsage = errors.New("usage")

type kind int

const (
	flagBool kind = iota
	flagValue
)

// spec describes one option: whether it takes a value, and how to apply it.
type spec struct {
	kind  kind
	apply func(c *Config, v string) error
}

func boolFlag(set func(c *Config)) spec {
	return spec{kind: flagBool, apply: func(c *Config, _ string) error { set(c); return nil }}
}

func valueFlag(set func(c *Config, v string) error) spec {
	return spec{kind: flagValue, apply: set}
}

// specs maps every long option name (without dashes) to its handling. Built per call so nothing
// package-level is mutable.
func specs() map[string]spec {
	return map[string]spec{
		"prefix": valueFlag(func(c *Config, v string) error {
			if v != "" && !strings.HasSuffix(v, "/") {
				return fmt.Errorf("--prefix %q must end with '/'", v)
			}
			c.Prefix = v
			return nil
		}),
		"region":           valueFlag(func(c *Config, v string) error { c.Region = v; return nonEmpty("--region", v) }),
		"endpoint-url":     valueFlag(parseEndpoint),
		"force-path-style": boolFlag(func(c *Config) { c.ForcePathStyle = true }),
		"no-sign-request":  boolFlag(func(c *Config) { c.NoSignRequest = true }),
		"read-only":        boolFlag(func(c *Config) { c.ReadOnly = true }),
		"allow-delete":     boolFlag(func(c *Config) { c.AllowDelete = true }),
		"allow-overwrite":  boolFlag(func(c *Config) { c.AllowOverwrite = true }),
		"allow-other":      boolFlag(func(c *Config) { c.AllowOther = true }),
		"allow-root":       boolFlag(func(c *Config) { c.AllowRoot = true }),
		"foreground":       boolFlag(func(c *Config) { c.Foreground = true }),
		"debug":            boolFlag(func(c *Config) { c.Debug = true }),
		"help":             boolFlag(func(c *Config) { c.ShowHelp = true }),
		"version":          boolFlag(func(c *Config) { c.ShowVersion = true }),
		"uid": valueFlag(func(c *Config, v string) error {
			n, err := parseID("--uid", v)
			c.UID, c.UIDSet = n, true
			return err
		}),
		"gid": valueFlag(func(c *Config, v string) error {
			n, err := parseID("--gid", v)
			c.GID, c.GIDSet = n, true
			return err
		}),
		"dir-mode":  valueFlag(func(c *Config, v string) (err error) { c.DirMode, err = parseMode("--dir-mode", v); return err }),
		"file-mode": valueFlag(func(c *Config, v string) (err error) { c.FileMode, err = parseMode("--file-mode", v); return err }),
		"metadata-ttl": valueFlag(func(c *Config, v string) (err error) {
			c.MetadataTTL, c.MinimalTTL, err = parseTTL(v)
			return err
		}),
		"cache": valueFlag(func(c *Config, v string) error { c.CacheDir = v; return nonEmpty("--cache", v) }),
		"max-cache-size": valueFlag(func(c *Config, v string) (err error) {
			c.MaxCacheSizeMiB, err = parsePositive("--max-cache-size", v, 1, math.MaxInt64>>20)
			return err
		}),
		"part-size": valueFlag(func(c *Config, v string) error {
			n, err := parsePositive("--part-size", v, minPartSize, maxPartSize)
			c.ReadPartSize, c.WritePartSize = n, n
			return err
		}),
		"read-part-size": valueFlag(func(c *Config, v string) (err error) {
			c.ReadPartSize, err = parsePositive("--read-part-size", v, 1, maxPartSize)
			return err
		}),
		"write-part-size": valueFlag(func(c *Config, v string) (err error) {
			c.WritePartSize, err = parsePositive("--write-part-size", v, minPartSize, maxPartSize)
			return err
		}),
		"max-threads": valueFlag(func(c *Config, v string) error {
			n, err := parsePositive("--max-threads", v, 1, 4096)
			c.MaxThreads = int(n)
			return err
		}),
		"maximum-throughput-gbps": valueFlag(func(c *Config, v string) error {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil || f <= 0 || math.IsInf(f, 0) || math.IsNaN(f) {
				return fmt.Errorf("--maximum-throughput-gbps %q: want a positive number", v)
			}
			c.MaximumThroughputGbps = f
			return nil
		}),
		"storage-class": valueFlag(func(c *Config, v string) error { c.StorageClass = v; return nonEmpty("--storage-class", v) }),
		"sse": valueFlag(func(c *Config, v string) error {
			switch v {
			case "AES256", "aws:kms", "aws:kms:dsse":
				c.SSE = v
				return nil
			}
			return fmt.Errorf("--sse %q: want AES256, aws:kms or aws:kms:dsse", v)
		}),
		"sse-kms-key-id":    valueFlag(func(c *Config, v string) error { c.SSEKMSKeyID = v; return nonEmpty("--sse-kms-key-id", v) }),
		"user-agent-prefix": valueFlag(func(c *Config, v string) error { c.UserAgentPrefix = v; return nil }),
	}
}

// shortNames maps the short forms mount-s3 accepts to long names.
func shortNames() map[string]string {
	return map[string]string{"f": "foreground", "d": "debug", "h": "help", "V": "version"}
}

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
		if seen[name] {
			return nil, fmt.Errorf("%w: --%s given more than once", ErrUsage, name)
		}
		seen[name] = true
		if s.kind == flagBool {
			if hasValue {
				return nil, fmt.Errorf("%w: --%s takes no value", ErrUsage, name)
			}
		} else if !hasValue {
			if i+1 >= len(args) {
				return nil, fmt.Errorf("%w: --%s needs a value", ErrUsage, name)
			}
			i++
			value = args[i]
		}
		if err := s.apply(c, value); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrUsage, err)
		}
	}
	if c.ShowHelp || c.ShowVersion {
		return c, nil
	}
	if len(positional) != 2 {
		return nil, fmt.Errorf("%w: want <bucket> <mountpoint>, got %d positional arguments", ErrUsage, len(positional))
	}
	c.Bucket, c.MountPoint = positional[0], positional[1]
	return c, c.validate()
}

func (c *Config) validate() error {
	if err := validBucket(c.Bucket); err != nil {
		return fmt.Errorf("%w: %w", ErrUsage, err)
	}
	if c.MountPoint == "" {
		return fmt.Errorf("%w: empty mountpoint", ErrUsage)
	}
	if c.AllowOther && c.AllowRoot {
		return fmt.Errorf("%w: --allow-other and --allow-root are mutually exclusive", ErrUsage)
	}
	if c.MaxCacheSizeMiB > 0 && c.CacheDir == "" {
		return fmt.Errorf("%w: --max-cache-size needs --cache", ErrUsage)
	}
	if c.SSEKMSKeyID != "" && c.SSE != "aws:kms" && c.SSE != "aws:kms:dsse" {
		return fmt.Errorf("%w: --sse-kms-key-id needs --sse aws:kms or aws:kms:dsse", ErrUsage)
	}
	if c.ReadOnly && (c.AllowDelete || c.AllowOverwrite) {
		return fmt.Errorf("%w: --read-only conflicts with --allow-delete and --allow-overwrite", ErrUsage)
	}
	return nil
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

func nonEmpty(flag, v string) error {
	if v == "" {
		return fmt.Errorf("%s: empty value", flag)
	}
	return nil
}

func parseEndpoint(c *Config, v string) error {
	if !strings.HasPrefix(v, "http://") && !strings.HasPrefix(v, "https://") {
		return fmt.Errorf("--endpoint-url %q: want an http:// or https:// URL", v)
	}
	if strings.TrimPrefix(strings.TrimPrefix(v, "http://"), "https://") == "" {
		return fmt.Errorf("--endpoint-url %q: no host", v)
	}
	c.EndpointURL = v
	return nil
}

func parseID(flag, v string) (uint32, error) {
	n, err := strconv.ParseUint(v, 10, 32)
	if err != nil || n == math.MaxUint32 {
		return 0, fmt.Errorf("%s %q: want a number below 4294967295", flag, v)
	}
	return uint32(n), nil
}

// parseMode reads an octal permission such as 755 or 0640 (mount-s3 takes octal digits).
func parseMode(flag, v string) (uint32, error) {
	n, err := strconv.ParseUint(v, 8, 32)
	if err != nil || n > 0o777 {
		return 0, fmt.Errorf("%s %q: want octal permission bits up to 777", flag, v)
	}
	return uint32(n), nil
}

func parseTTL(v string) (time.Duration, bool, error) {
	switch v {
	case "indefinite":
		return IndefiniteTTL, false, nil
	case "minimal":
		return 0, true, nil
	}
	n, err := strconv.ParseUint(v, 10, 32)
	if err != nil {
		return 0, false, fmt.Errorf("--metadata-ttl %q: want seconds, indefinite or minimal", v)
	}
	return time.Duration(n) * time.Second, false, nil
}

func parsePositive(flag, v string, minV, maxV int64) (int64, error) {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < minV || n > maxV {
		return 0, fmt.Errorf("%s %q: want an integer between %d and %d", flag, v, minV, maxV)
	}
	return n, nil
}

// validBucket applies S3's bucket naming rules loosely (3-63 of [a-z0-9.-], or an access point ARN),
// enough to reject typos before any request is made.
func validBucket(b string) error {
	if strings.HasPrefix(b, "arn:") {
		return nil
	}
	if len(b) < 3 || len(b) > 63 {
		return fmt.Errorf("bucket %q: want 3 to 63 characters", b)
	}
	for _, r := range b {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '.' || r == '-' || r == '_') {
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
  -f, --foreground           stay in the foreground
  -d, --debug                verbose logs
Environment: AWS_MAX_ATTEMPTS and the standard AWS credential chain.
`
