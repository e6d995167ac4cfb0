package options

import (
	"fmt"
	"strings"
)

// bucketFromURI takes an s3://bucket/prefix/ first argument apart, as mount-s3 (1.18+) does; --prefix is
// then not allowed.
func (c *Config) bucketFromURI() error {
	rest, ok := strings.CutPrefix(c.Bucket, "s3://")
	if !ok {
		return nil
	}
	bucket, prefix, _ := strings.Cut(rest, "/")
	if prefix != "" && !strings.HasSuffix(prefix, "/") {
		return fmt.Errorf("bucket %q: the prefix of an s3:// URI must end with '/'", c.Bucket)
	}
	if prefix != "" && c.Prefix != "" {
		return fmt.Errorf("bucket %q: --prefix is not allowed with an s3:// URI that has a prefix", c.Bucket)
	}
	if strings.HasPrefix(bucket, "arn:") {
		return fmt.Errorf("bucket %q: ARNs are not supported in s3:// URIs", c.Bucket)
	}
	c.Bucket = bucket
	if prefix != "" {
		c.Prefix = prefix
	}
	return nil
}

// validate refuses the combinations mount-s3 refuses, naming the options.
func (c *Config) validate() error {
	if err := c.conflicts(); err != nil {
		return fmt.Errorf("%w: %w", ErrUsage, err)
	}
	return nil
}

func (c *Config) conflicts() error {
	if err := validBucket(c.Bucket); err != nil {
		return err
	}
	if c.MountPoint == "" {
		return fmt.Errorf("empty mountpoint")
	}
	set := func(on bool, name string) string {
		if on {
			return name
		}
		return ""
	}
	checks := []struct {
		when     bool
		conflict []string
		reason   string
	}{
		{c.AllowOther, []string{set(c.AllowRoot, "--allow-root")}, "--allow-other and %s are mutually exclusive"},
		{c.given["part-size"], []string{set(c.given["read-part-size"], "--read-part-size"), set(c.given["write-part-size"], "--write-part-size")},
			"--part-size cannot be used with %s"},
		{c.NoLog, []string{set(c.LogDirectory != "", "--log-directory"), set(c.Debug, "--debug"), set(c.DebugCRT, "--debug-crt"),
			set(c.LogMetrics, "--log-metrics")}, "--no-log cannot be used with %s"},
		{c.ReadOnly, []string{set(c.AllowDelete, "--allow-delete"), set(c.AllowOverwrite, "--allow-overwrite")},
			"--read-only conflicts with %s"},
		// S3's endpoint rules refuse accelerate with path-style addressing; mount-s3 fails on it at start.
		{c.TransferAcceleration && c.EndpointURL == "", []string{set(c.ForcePathStyle, "--force-path-style")},
			"--transfer-acceleration cannot be used with %s"},
		// mount-s3 refuses it on a FUSE fd: the process that mounted the fd owns the mount.
		{c.IsFDMount(), []string{set(c.AutoUnmount, "--auto-unmount")}, "%s cannot be used with a /dev/fd/N mountpoint; the process that mounted the fd unmounts it"},
	}
	for _, ch := range checks {
		if !ch.when {
			continue
		}
		var names []string
		for _, n := range ch.conflict {
			if n != "" {
				names = append(names, n)
			}
		}
		if len(names) > 0 {
			return fmt.Errorf(ch.reason, strings.Join(names, " and "))
		}
	}
	if c.MaxCacheSizeMiB > 0 && c.CacheDir == "" {
		return fmt.Errorf("--max-cache-size needs --cache")
	}
	if c.SSEKMSKeyID != "" && c.SSE != "aws:kms" && c.SSE != "aws:kms:dsse" {
		return fmt.Errorf("--sse-kms-key-id needs --sse aws:kms or aws:kms:dsse")
	}
	if c.OTLPExportInterval > 0 && c.OTLPEndpoint == "" {
		return fmt.Errorf("--otlp-export-interval needs --otlp-endpoint")
	}
	return nil
}

// warnings names each option accepted without (all of) mount-s3's effect, and why.
func (c *Config) warnings() []string {
	var w []string
	add := func(on bool, msg string) {
		if on {
			w = append(w, msg)
		}
	}
	add(c.EndpointURL != "" && c.DualStack, "--dual-stack has no effect: --endpoint-url names the endpoint")
	add(c.EndpointURL != "" && c.TransferAcceleration, "--transfer-acceleration has no effect: --endpoint-url names the endpoint")
	add(c.IncrementalUpload, "--incremental-upload: new files are uploaded in parts while they are written, as always; "+
		"appending to existing objects is not supported by s3-fuse, so opening one for append still fails with EPERM")
	add(c.CacheXZ != "", "--cache-xz has no effect: s3-fuse has no shared S3 Express cache; reads go to the bucket (use --cache for a local cache)")
	add(c.BucketType == "directory", "--bucket-type directory: s3-fuse treats directory buckets like general purpose ones (no rename, no append)")
	add(c.DebugCRT, "--debug-crt has no effect: s3-fuse does not use the AWS Common Runtime (--debug logs its S3 requests)")
	add(c.AutoUnmount, "--auto-unmount: s3-fuse unmounts when it stops on a signal, as always; after a crash the mount stays until unmounted (no fusermount helper)")
	add(c.LogMetrics, "--log-metrics has no effect: s3-fuse keeps no metrics summary (--debug logs each reader's counters)")
	add(c.OTLPEndpoint != "", "--otlp-endpoint has no effect: s3-fuse does not export OTLP metrics")
	return w
}
