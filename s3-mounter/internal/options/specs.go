package options

import (
	"fmt"
	"maps"
	"math"
	"strconv"
	"strings"
	"time"
)

type kind int

const (
	flagBool kind = iota
	flagValue
)

// spec describes one option: whether it takes a value, whether it may be repeated, and how to apply it.
type spec struct {
	kind   kind
	repeat bool
	apply  func(c *Config, v string) error
}

func boolFlag(set func(c *Config)) spec {
	return spec{kind: flagBool, apply: func(c *Config, _ string) error { set(c); return nil }}
}

func valueFlag(set func(c *Config, v string) error) spec {
	return spec{kind: flagValue, apply: set}
}

// stringFlag stores a non-empty value.
func stringFlag(name string, dst func(c *Config) *string) spec {
	return valueFlag(func(c *Config, v string) error { *dst(c) = v; return nonEmpty("--"+name, v) })
}

// checkArgsFlag is s3-fuse's own hidden option: parse and validate the command line, print the warnings,
// and exit without mounting (the option walk test uses it).
const checkArgsFlag = "check-args"

// specs maps every long option name (without dashes) to its handling: every option of mount-s3 1.2x
// (shared/mountpointopts) and the hidden --check-args. Built per call so nothing package-level is mutable.
func specs() map[string]spec {
	all := s3Specs()
	maps.Copy(all, mountSpecs())
	maps.Copy(all, tuningSpecs())
	return all
}

// s3Specs are the options of the bucket and its objects: where it is, how requests are signed and sent, and
// what an upload stores.
func s3Specs() map[string]spec {
	return map[string]spec{
		"prefix": valueFlag(func(c *Config, v string) error {
			if v != "" && !strings.HasSuffix(v, "/") {
				return fmt.Errorf("--prefix %q must end with '/'", v)
			}
			c.Prefix = v
			return nil
		}),
		"region":                stringFlag("region", func(c *Config) *string { return &c.Region }),
		"endpoint-url":          valueFlag(parseEndpoint),
		"force-path-style":      boolFlag(func(c *Config) { c.ForcePathStyle = true }),
		"transfer-acceleration": boolFlag(func(c *Config) { c.TransferAcceleration = true }),
		"dual-stack":            boolFlag(func(c *Config) { c.DualStack = true }),
		"requester-pays":        boolFlag(func(c *Config) { c.RequesterPays = true }),
		"bucket-type": valueFlag(func(c *Config, v string) error {
			c.BucketType = v
			return oneOf("--bucket-type", v, "general-purpose", "directory")
		}),
		"expected-bucket-owner": valueFlag(func(c *Config, v string) error {
			c.ExpectedBucketOwner = v
			return nonEmpty("--expected-bucket-owner", v)
		}),
		"upload-checksums": valueFlag(func(c *Config, v string) error {
			c.UploadChecksums = v
			return oneOf("--upload-checksums", v, "crc32c", "off")
		}),
		"no-sign-request": boolFlag(func(c *Config) { c.NoSignRequest = true }),
		"profile":         stringFlag("profile", func(c *Config) *string { return &c.Profile }),
		"bind": {kind: flagValue, repeat: true, apply: func(c *Config, v string) error {
			c.Bind = append(c.Bind, v)
			return nonEmpty("--bind", v)
		}},
		"storage-class": stringFlag("storage-class", func(c *Config) *string { return &c.StorageClass }),
		"sse": valueFlag(func(c *Config, v string) error {
			c.SSE = v
			return oneOf("--sse", v, "AES256", "aws:kms", "aws:kms:dsse")
		}),
		"sse-kms-key-id": valueFlag(func(c *Config, v string) error {
			// mount-s3 takes only a key ARN: S3 would accept an alias, but Mountpoint refuses it up front.
			if !strings.HasPrefix(v, "arn:") || !strings.Contains(v, ":key") {
				return fmt.Errorf("--sse-kms-key-id %q: want a KMS key ARN (arn:...:key/...); key IDs and aliases are not accepted", v)
			}
			c.SSEKMSKeyID = v
			return nil
		}),
		"user-agent-prefix": valueFlag(func(c *Config, v string) error { c.UserAgentPrefix = v; return nil }),
		checkArgsFlag:       boolFlag(func(c *Config) { c.CheckArgs = true }),
	}
}

// mountSpecs are the options of the mount itself: what it allows, who owns its files, how long metadata is
// trusted, logging, and the process's own switches.
func mountSpecs() map[string]spec {
	return map[string]spec{
		"read-only":          boolFlag(func(c *Config) { c.ReadOnly = true }),
		"allow-delete":       boolFlag(func(c *Config) { c.AllowDelete = true }),
		"allow-overwrite":    boolFlag(func(c *Config) { c.AllowOverwrite = true }),
		"incremental-upload": boolFlag(func(c *Config) { c.IncrementalUpload = true }),
		"auto-unmount":       boolFlag(func(c *Config) { c.AutoUnmount = true }),
		"allow-other":        boolFlag(func(c *Config) { c.AllowOther = true }),
		"allow-root":         boolFlag(func(c *Config) { c.AllowRoot = true }),
		"foreground":         boolFlag(func(c *Config) { c.Foreground = true }),
		"debug":              boolFlag(func(c *Config) { c.Debug = true }),
		"debug-crt":          boolFlag(func(c *Config) { c.DebugCRT = true }),
		"log-metrics":        boolFlag(func(c *Config) { c.LogMetrics = true }),
		"no-log":             boolFlag(func(c *Config) { c.NoLog = true }),
		"log-directory":      stringFlag("log-directory", func(c *Config) *string { return &c.LogDirectory }),
		"otlp-endpoint":      valueFlag(func(c *Config, v string) error { c.OTLPEndpoint = v; return parseURL("--otlp-endpoint", v) }),
		"otlp-export-interval": valueFlag(func(c *Config, v string) error {
			n, err := parsePositive("--otlp-export-interval", v, 1, math.MaxInt32)
			c.OTLPExportInterval = int(n)
			return err
		}),
		"help":    boolFlag(func(c *Config) { c.ShowHelp = true }),
		"version": boolFlag(func(c *Config) { c.ShowVersion = true }),
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
			c.MetadataTTL, c.MinimalTTL, err = parseTTL("--metadata-ttl", v)
			return err
		}),
		"negative-metadata-ttl": valueFlag(func(c *Config, v string) (err error) {
			c.NegativeMetadataTTL, _, err = parseTTL("--negative-metadata-ttl", v)
			c.NegativeMetadataTTLSet = true
			return err
		}),
	}
}

// tuningSpecs are the cache and transfer options.
func tuningSpecs() map[string]spec {
	return map[string]spec{
		"cache":    stringFlag("cache", func(c *Config) *string { return &c.CacheDir }),
		"cache-xz": valueFlag(parseCacheXZ),
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
	}
}

// shortNames maps the short forms mount-s3 accepts to long names.
func shortNames() map[string]string {
	return map[string]string{"f": "foreground", "d": "debug", "h": "help", "V": "version", "l": "log-directory"}
}

func nonEmpty(flag, v string) error {
	if v == "" {
		return fmt.Errorf("%s: empty value", flag)
	}
	return nil
}

func oneOf(flag, v string, allowed ...string) error {
	for _, a := range allowed {
		if v == a {
			return nil
		}
	}
	return fmt.Errorf("%s %q: want one of %s", flag, v, strings.Join(allowed, ", "))
}

func parseURL(flag, v string) error {
	if !strings.HasPrefix(v, "http://") && !strings.HasPrefix(v, "https://") {
		return fmt.Errorf("%s %q: want an http:// or https:// URL", flag, v)
	}
	if strings.TrimPrefix(strings.TrimPrefix(v, "http://"), "https://") == "" {
		return fmt.Errorf("%s %q: no host", flag, v)
	}
	return nil
}

func parseEndpoint(c *Config, v string) error {
	c.EndpointURL = v
	return parseURL("--endpoint-url", v)
}

// parseCacheXZ takes the S3 Express bucket of the shared cache, by name or as s3://bucket[/] (no prefix,
// as mount-s3).
func parseCacheXZ(c *Config, v string) error {
	name := v
	if rest, ok := strings.CutPrefix(v, "s3://"); ok {
		name = strings.TrimSuffix(rest, "/")
		if strings.Contains(name, "/") {
			return fmt.Errorf("--cache-xz %q: the cache bucket must not have a prefix", v)
		}
	}
	if err := validBucket(name); err != nil {
		return fmt.Errorf("--cache-xz: %w", err)
	}
	c.CacheXZ = name
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

func parseTTL(flag, v string) (time.Duration, bool, error) {
	switch v {
	case "indefinite":
		return IndefiniteTTL, false, nil
	case "minimal":
		return 0, true, nil
	}
	n, err := strconv.ParseUint(v, 10, 32)
	if err != nil {
		return 0, false, fmt.Errorf("%s %q: want seconds, indefinite or minimal", flag, v)
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
