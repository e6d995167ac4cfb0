package options

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stowage-csi/stowage/shared/mountpointopts"
)

func TestParseAcceptsMountS3Forms(t *testing.T) {
	tests := []struct {
		name  string
		args  []string
		check func(*Config) bool
	}{
		{"equals form", []string{"b1b", "/mnt", "--region=eu-west-1"}, func(c *Config) bool { return c.Region == "eu-west-1" }},
		{"space form", []string{"--region", "eu-west-1", "b1b", "/mnt"}, func(c *Config) bool { return c.Region == "eu-west-1" && c.Bucket == "b1b" }},
		{"switches", []string{"b1b", "/mnt", "--allow-delete", "--allow-overwrite", "--allow-other", "--force-path-style", "--no-sign-request", "--foreground", "--debug"},
			func(c *Config) bool {
				return c.AllowDelete && c.AllowOverwrite && c.AllowOther && c.ForcePathStyle && c.NoSignRequest && c.Foreground && c.Debug
			}},
		{"short foreground", []string{"-f", "b1b", "/mnt"}, func(c *Config) bool { return c.Foreground }},
		{"fd mountpoint", []string{"b1b", "/dev/fd/3", "--foreground"}, func(c *Config) bool { return c.IsFDMount() }},
		{"not an fd", []string{"b1b", "/dev/fdx"}, func(c *Config) bool { return !c.IsFDMount() }},
		{"prefix", []string{"b1b", "/mnt", "--prefix", "a/b/"}, func(c *Config) bool { return c.Prefix == "a/b/" }},
		{"uid gid modes", []string{"b1b", "/mnt", "--uid=1000", "--gid", "2000", "--dir-mode=770", "--file-mode", "0660"},
			func(c *Config) bool {
				return c.UID == 1000 && c.UIDSet && c.GID == 2000 && c.GIDSet && c.DirMode == 0o770 && c.FileMode == 0o660
			}},
		{"defaults", []string{"b1b", "/mnt"}, func(c *Config) bool {
			return c.DirMode == 0o755 && c.FileMode == 0o644 && c.ReadPartSize == DefaultPartSize && c.WritePartSize == DefaultPartSize &&
				c.MaxThreads == DefaultMaxThreads && c.MetadataTTL == DefaultMetadataTTL && !c.UIDSet
		}},
		{"ttl seconds", []string{"b1b", "/mnt", "--metadata-ttl", "60"}, func(c *Config) bool { return c.MetadataTTL == time.Minute }},
		{"ttl indefinite", []string{"b1b", "/mnt", "--metadata-ttl=indefinite"}, func(c *Config) bool { return c.MetadataTTL == IndefiniteTTL }},
		{"ttl minimal", []string{"b1b", "/mnt", "--metadata-ttl", "minimal"}, func(c *Config) bool { return c.MetadataTTL == 0 && c.MinimalTTL }},
		{"part size sets both", []string{"b1b", "/mnt", "--part-size", "16777216"}, func(c *Config) bool { return c.ReadPartSize == 16<<20 && c.WritePartSize == 16<<20 }},
		{"read and write part size", []string{"b1b", "/mnt", "--read-part-size=1048576", "--write-part-size", "5242880"},
			func(c *Config) bool { return c.ReadPartSize == 1<<20 && c.WritePartSize == 5<<20 }},
		{"cache", []string{"b1b", "/mnt", "--cache", "/tmp/c", "--max-cache-size", "512"}, func(c *Config) bool { return c.CacheDir == "/tmp/c" && c.MaxCacheSizeMiB == 512 }},
		{"sse kms", []string{"b1b", "/mnt", "--sse", "aws:kms", "--sse-kms-key-id", "arn:aws:kms:r:1:key/k"}, func(c *Config) bool { return c.SSE == "aws:kms" && c.SSEKMSKeyID == "arn:aws:kms:r:1:key/k" }},
		{"endpoint", []string{"b1b", "/mnt", "--endpoint-url", "http://127.0.0.1:9000"}, func(c *Config) bool { return c.EndpointURL == "http://127.0.0.1:9000" }},
		{"throughput threads class ua", []string{"b1b", "/mnt", "--maximum-throughput-gbps", "25", "--max-threads", "32", "--storage-class", "STANDARD_IA", "--user-agent-prefix", "s3-csi-driver/2"},
			func(c *Config) bool {
				return c.MaximumThroughputGbps == 25 && c.MaxThreads == 32 && c.StorageClass == "STANDARD_IA" && c.UserAgentPrefix == "s3-csi-driver/2"
			}},
		{"double dash ends options", []string{"--read-only", "--", "b1b", "/mnt"}, func(c *Config) bool { return c.ReadOnly && c.MountPoint == "/mnt" }},
		{"help needs no positionals", []string{"--help"}, func(c *Config) bool { return c.ShowHelp }},
		{"request headers", []string{"b1b", "/mnt", "--requester-pays", "--expected-bucket-owner", "111122223333"},
			func(c *Config) bool {
				return c.RequesterPays && c.ExpectedBucketOwner == "111122223333" && len(c.Warnings) == 0
			}},
		{"endpoint choices", []string{"b1b", "/mnt", "--dual-stack", "--transfer-acceleration"},
			func(c *Config) bool { return c.DualStack && c.TransferAcceleration && len(c.Warnings) == 0 }},
		{"endpoint choices ignored with an endpoint", []string{"b1b", "/mnt", "--dual-stack", "--endpoint-url=http://h"},
			func(c *Config) bool { return len(c.Warnings) == 1 && strings.HasPrefix(c.Warnings[0], "--dual-stack") }},
		{"upload checksums off", []string{"b1b", "/mnt", "--upload-checksums", "off"}, func(c *Config) bool { return c.UploadChecksums == "off" }},
		{"negative ttl", []string{"b1b", "/mnt", "--negative-metadata-ttl=30"},
			func(c *Config) bool { return c.NegativeMetadataTTL == 30*time.Second && c.NegativeMetadataTTLSet }},
		{"bind repeats", []string{"b1b", "/mnt", "--bind", "eth0", "--bind=eth1"}, func(c *Config) bool { return len(c.Bind) == 2 && c.Bind[1] == "eth1" }},
		{"log directory short", []string{"-l", "/var/log/mp", "b1b", "/mnt"}, func(c *Config) bool { return c.LogDirectory == "/var/log/mp" }},
		{"no-log", []string{"b1b", "/mnt", "--no-log"}, func(c *Config) bool { return c.NoLog }},
		{"s3 uri", []string{"s3://b1b/some/prefix/", "/mnt"}, func(c *Config) bool { return c.Bucket == "b1b" && c.Prefix == "some/prefix/" }},
		{"cache-xz warns", []string{"b1b", "/mnt", "--cache-xz", "s3://c--usw2-az1--x-s3/"},
			func(c *Config) bool {
				return c.CacheXZ == "c--usw2-az1--x-s3" && len(c.Warnings) == 1 && strings.HasPrefix(c.Warnings[0], "--cache-xz")
			}},
		{"otlp", []string{"b1b", "/mnt", "--otlp-endpoint", "http://c:4318", "--otlp-export-interval", "10"},
			func(c *Config) bool { return c.OTLPExportInterval == 10 && len(c.Warnings) == 1 }},
		{"check-args", []string{"b1b", "/mnt", "--check-args"}, func(c *Config) bool { return c.CheckArgs }},
		{"auto-unmount on a directory", []string{"b1b", "/mnt", "--auto-unmount"}, func(c *Config) bool { return c.AutoUnmount }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse(tc.args)
			if err != nil {
				t.Fatalf("Parse(%q): %v", tc.args, err)
			}
			if !tc.check(c) {
				t.Fatalf("Parse(%q) = %+v", tc.args, c)
			}
		})
	}
}

func TestParseRejectsBadInputWithOneLineReason(t *testing.T) {
	tests := []struct {
		name, want string
		args       []string
	}{
		{"no positionals", "positional", []string{}},
		{"missing mountpoint", "positional", []string{"b1b"}},
		{"extra positional", "positional", []string{"b1b", "/mnt", "x"}},
		{"unknown option", "--bogus", []string{"b1b", "/mnt", "--bogus"}},
		{"unknown short", "-x", []string{"-x", "b1b", "/mnt"}},
		{"value missing", "needs a value", []string{"b1b", "/mnt", "--region"}},
		{"option in place of a value", "--region needs a value", []string{"b1b", "/mnt", "--region", "--debug"}},
		{"switch with value", "takes no value", []string{"b1b", "/mnt", "--read-only=true"}},
		{"repeated", "more than once", []string{"b1b", "/mnt", "--uid=1", "--uid=2"}},
		{"prefix without slash", "must end with '/'", []string{"b1b", "/mnt", "--prefix", "a"}},
		{"bad uid", "--uid", []string{"b1b", "/mnt", "--uid", "-1"}},
		{"bad mode", "--dir-mode", []string{"b1b", "/mnt", "--dir-mode", "789"}},
		{"mode too big", "--file-mode", []string{"b1b", "/mnt", "--file-mode", "7777"}},
		{"bad ttl", "--metadata-ttl", []string{"b1b", "/mnt", "--metadata-ttl", "soon"}},
		{"part size too small", "--part-size", []string{"b1b", "/mnt", "--part-size", "1024"}},
		{"bad threads", "--max-threads", []string{"b1b", "/mnt", "--max-threads", "0"}},
		{"bad throughput", "--maximum-throughput-gbps", []string{"b1b", "/mnt", "--maximum-throughput-gbps", "NaN"}},
		{"bad sse", "--sse", []string{"b1b", "/mnt", "--sse", "rot13"}},
		{"kms key without kms", "--sse-kms-key-id", []string{"b1b", "/mnt", "--sse-kms-key-id", "k"}},
		{"cache size without cache", "--max-cache-size", []string{"b1b", "/mnt", "--max-cache-size", "10"}},
		{"endpoint scheme", "--endpoint-url", []string{"b1b", "/mnt", "--endpoint-url", "127.0.0.1:9000"}},
		{"bad bucket", "bucket", []string{"Bad Bucket", "/mnt"}},
		{"short bucket", "bucket", []string{"ab", "/mnt"}},
		{"other and root", "mutually exclusive", []string{"b1b", "/mnt", "--allow-other", "--allow-root"}},
		{"read-only and delete", "--read-only", []string{"b1b", "/mnt", "--read-only", "--allow-delete"}},
		{"part-size with read-part-size", "--part-size cannot be used with --read-part-size", []string{"b1b", "/mnt", "--part-size=8388608", "--read-part-size=8388608"}},
		{"no-log with debug", "--no-log cannot be used with --debug", []string{"b1b", "/mnt", "--no-log", "-d"}},
		{"interval without endpoint", "--otlp-export-interval needs --otlp-endpoint", []string{"b1b", "/mnt", "--otlp-export-interval=5"}},
		{"auto-unmount on an fd", "--auto-unmount cannot be used with a /dev/fd/N", []string{"b1b", "/dev/fd/3", "--auto-unmount"}},
		{"accelerate path-style", "--transfer-acceleration cannot be used with --force-path-style", []string{"b1b", "/mnt", "--transfer-acceleration", "--force-path-style"}},
		{"bad bucket type", "--bucket-type", []string{"b1b", "/mnt", "--bucket-type", "express"}},
		{"bad checksums", "--upload-checksums", []string{"b1b", "/mnt", "--upload-checksums", "sha1"}},
		{"bad negative ttl", "--negative-metadata-ttl", []string{"b1b", "/mnt", "--negative-metadata-ttl", "-1"}},
		{"kms alias", "--sse-kms-key-id", []string{"b1b", "/mnt", "--sse", "aws:kms", "--sse-kms-key-id", "alias/x"}},
		{"cache-xz prefix", "--cache-xz", []string{"b1b", "/mnt", "--cache-xz", "s3://c/p/"}},
		{"s3 uri and prefix", "--prefix is not allowed", []string{"s3://b1b/p/", "/mnt", "--prefix", "q/"}},
		{"feature-gated option of mount-s3", "--max-memory-target", []string{"b1b", "/mnt", "--max-memory-target", "1024"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(tc.args)
			if err == nil {
				t.Fatalf("Parse(%q) succeeded", tc.args)
			}
			if !errors.Is(err, ErrUsage) {
				t.Errorf("error %v is not ErrUsage", err)
			}
			if !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("error %q: want one line mentioning %q", err, tc.want)
			}
		})
	}
}

// FuzzParse checks that no command line panics and that accepted ones are self-consistent.
func FuzzParse(f *testing.F) {
	f.Add("b1b\x00/mnt\x00--region=us-east-1")
	f.Add("--prefix\x00a/\x00b1b\x00/dev/fd/3\x00-f")
	f.Add("b1b\x00/mnt\x00--metadata-ttl\x00indefinite\x00--cache\x00/c\x00--max-cache-size=5")
	f.Add("--\x00--x\x00/m")
	f.Fuzz(func(t *testing.T, joined string) {
		args := strings.Split(joined, "\x00")
		c, err := Parse(args)
		if err != nil {
			if !errors.Is(err, ErrUsage) {
				t.Fatalf("error not marked as usage: %v", err)
			}
			return
		}
		if c.ShowHelp || c.ShowVersion {
			return
		}
		if c.Bucket == "" || c.MountPoint == "" {
			t.Fatalf("accepted without bucket or mountpoint: %q", args)
		}
		if c.Prefix != "" && !strings.HasSuffix(c.Prefix, "/") {
			t.Fatalf("accepted prefix %q", c.Prefix)
		}
		if c.DirMode > 0o777 || c.FileMode > 0o777 || c.MaxThreads < 1 || c.ReadPartSize < 1 || c.WritePartSize < 5<<20 {
			t.Fatalf("accepted out-of-range values: %+v", c)
		}
	})
}

// TestParserCoversMountpointsList checks that s3-fuse parses exactly mount-s3's options: each one of the
// shared list (with its example value, and its short alias), and nothing else but the hidden --check-args.
func TestParserCoversMountpointsList(t *testing.T) {
	table := specs()
	shorts := shortNames()
	listed := map[string]bool{checkArgsFlag: true}
	for _, o := range mountpointopts.All() {
		if !o.MountS3 {
			if _, ok := table[o.Name]; ok {
				t.Errorf("--%s is not a mount-s3 option, but s3-fuse accepts it", o.Name)
			}
			continue
		}
		listed[o.Name] = true
		s, ok := table[o.Name]
		if !ok {
			t.Errorf("--%s: mount-s3 accepts it, s3-fuse does not", o.Name)
			continue
		}
		if (s.kind == flagValue) != o.Value || s.repeat != o.Repeatable {
			t.Errorf("--%s: value %v repeat %v, mount-s3: value %v repeat %v", o.Name, s.kind == flagValue, s.repeat, o.Value, o.Repeatable)
		}
		if o.Short != "" && shorts[o.Short] != o.Name {
			t.Errorf("-%s: want an alias of --%s, got %q", o.Short, o.Name, shorts[o.Short])
		}
		args := append([]string{"b1b", "/mnt"}, o.Args()...)
		if _, err := Parse(args); err != nil && o.Name != "help" && o.Name != "version" {
			t.Errorf("Parse(%q): %v", args, err)
		}
	}
	for name := range table {
		if !listed[name] {
			t.Errorf("s3-fuse accepts --%s, which mount-s3 does not have", name)
		}
	}
	for short, long := range shorts {
		if o, ok := mountpointopts.Lookup(short); !ok || o.Name != long {
			t.Errorf("s3-fuse's -%s is not mount-s3's", short)
		}
	}
}
