package options

import (
	"errors"
	"strings"
	"testing"
	"time"
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
		{"sse kms", []string{"b1b", "/mnt", "--sse", "aws:kms", "--sse-kms-key-id", "arn:aws:kms:k"}, func(c *Config) bool { return c.SSE == "aws:kms" && c.SSEKMSKeyID == "arn:aws:kms:k" }},
		{"endpoint", []string{"b1b", "/mnt", "--endpoint-url", "http://127.0.0.1:9000"}, func(c *Config) bool { return c.EndpointURL == "http://127.0.0.1:9000" }},
		{"throughput threads class ua", []string{"b1b", "/mnt", "--maximum-throughput-gbps", "25", "--max-threads", "32", "--storage-class", "STANDARD_IA", "--user-agent-prefix", "s3-csi-driver/2"},
			func(c *Config) bool {
				return c.MaximumThroughputGbps == 25 && c.MaxThreads == 32 && c.StorageClass == "STANDARD_IA" && c.UserAgentPrefix == "s3-csi-driver/2"
			}},
		{"double dash ends options", []string{"--read-only", "--", "b1b", "/mnt"}, func(c *Config) bool { return c.ReadOnly && c.MountPoint == "/mnt" }},
		{"help needs no positionals", []string{"--help"}, func(c *Config) bool { return c.ShowHelp }},
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
