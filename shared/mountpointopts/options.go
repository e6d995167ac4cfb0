// Package mountpointopts is the one list of Mountpoint's command-line options (mount-s3 1.2x, its
// cli.rs) and of what the S3 CSI node does with each one in a PersistentVolume's mountOptions. s3-fuse
// parses exactly these options and the node's allow-list is derived from them, so the two cannot drift
// apart; the e2e walk test takes every entry through both.
package mountpointopts

import "sort"

// NodePolicy is what the S3 node plugin does with an option found in a volume's mountOptions.
type NodePolicy int

const (
	// Pass sends the option to Mountpoint unchanged (upstream passes every option it does not name).
	Pass NodePolicy = iota
	// Drop removes the option silently: the node decides how Mountpoint runs (upstream drops these).
	Drop
	// Refuse fails NodePublishVolume with InvalidArgument naming the option and Reason.
	Refuse
	// Rewrite turns the option into something else (the kernel mount's flags, the environment, a value
	// the node forces); Reason says what.
	Rewrite
)

// Option describes one option.
type Option struct {
	// Name is the long name without dashes ("region"), or a single letter for a short-only form ("o").
	Name string
	// Short is mount-s3's one-letter alias ("f" for foreground), or "".
	Short string
	// Value is true when the option takes a value.
	Value bool
	// Repeatable options may be given more than once, each with its own value (--bind).
	Repeatable bool
	// Example is a value mount-s3 accepts, for tests and the README ("" for switches).
	Example string
	// MountS3 is false for the options only the CSI driver knows (--aws-max-attempts) or refuses
	// (-o, --ca-bundle); mount-s3 itself would exit 2 on them.
	MountS3 bool
	// Requires names the option mount-s3 needs beside this one (--max-cache-size needs --cache), or "".
	Requires string
	// Node is the node's policy and Reason its explanation (for Refuse and Rewrite, shown to users).
	Node   NodePolicy
	Reason string
}

// All returns every option, sorted by name. It builds a new slice per call, so callers may keep or
// change what they get without affecting anyone else.
func All() []Option {
	opts := []Option{
		// Bucket options.
		{Name: "prefix", Value: true, Example: "some/prefix/", MountS3: true},
		{Name: "region", Value: true, Example: "us-west-2", MountS3: true},
		{Name: "endpoint-url", Value: true, Example: "https://s3.example.com", MountS3: true},
		{Name: "force-path-style", MountS3: true},
		{Name: "transfer-acceleration", MountS3: true},
		{Name: "dual-stack", MountS3: true},
		{Name: "requester-pays", MountS3: true},
		{Name: "bucket-type", Value: true, Example: "general-purpose", MountS3: true},
		{Name: "storage-class", Value: true, Example: "STANDARD_IA", MountS3: true},
		{Name: "expected-bucket-owner", Value: true, Example: "111122223333", MountS3: true},
		{Name: "sse", Value: true, Example: "aws:kms", MountS3: true},
		{Name: "sse-kms-key-id", Value: true, Requires: "sse", Example: "arn:aws:kms:us-west-2:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab", MountS3: true},
		{Name: "upload-checksums", Value: true, Example: "off", MountS3: true},
		// AWS credentials options.
		{Name: "no-sign-request", MountS3: true},
		{Name: "profile", Value: true, Example: "default", MountS3: true},
		// Mount options.
		{Name: "read-only", MountS3: true, Node: Rewrite, Reason: "becomes the kernel mount's read-only flag"},
		{Name: "allow-delete", MountS3: true},
		{Name: "allow-overwrite", MountS3: true},
		{Name: "incremental-upload", MountS3: true},
		{Name: "auto-unmount", MountS3: true, Node: Refuse,
			Reason: "the node mounts Mountpoint on a FUSE file descriptor, and mount-s3 refuses --auto-unmount there; the node unmounts the volume itself"},
		{Name: "allow-root", MountS3: true},
		{Name: "allow-other", MountS3: true},
		{Name: "uid", Value: true, Example: "1000", MountS3: true},
		{Name: "gid", Value: true, Example: "1000", MountS3: true},
		{Name: "dir-mode", Value: true, Example: "0755", MountS3: true},
		{Name: "file-mode", Value: true, Example: "0644", MountS3: true},
		{Name: "foreground", Short: "f", MountS3: true, Node: Drop},
		{Name: "help", Short: "h", MountS3: true, Node: Drop},
		{Name: "version", Short: "V", MountS3: true, Node: Drop},
		// Client options.
		{Name: "maximum-throughput-gbps", Value: true, Example: "10", MountS3: true},
		{Name: "max-threads", Value: true, Example: "16", MountS3: true},
		{Name: "part-size", Value: true, Example: "8388608", MountS3: true},
		{Name: "read-part-size", Value: true, Example: "8388608", MountS3: true},
		{Name: "write-part-size", Value: true, Example: "8388608", MountS3: true},
		{Name: "bind", Value: true, Repeatable: true, Example: "lo", MountS3: true},
		// Logging options.
		{Name: "log-directory", Short: "l", Value: true, Example: "/tmp", MountS3: true},
		{Name: "log-metrics", MountS3: true},
		{Name: "otlp-endpoint", Value: true, Example: "http://localhost:4318", MountS3: true},
		{Name: "otlp-export-interval", Value: true, Requires: "otlp-endpoint", Example: "60", MountS3: true},
		{Name: "debug", Short: "d", MountS3: true},
		{Name: "debug-crt", MountS3: true},
		{Name: "no-log", MountS3: true},
		// Caching options.
		{Name: "cache", Value: true, Example: "/tmp", MountS3: true, Node: Rewrite,
			Reason: "points at the Mountpoint Pod's cache volume when the volume has one (volume attribute cache)"},
		{Name: "metadata-ttl", Value: true, Example: "indefinite", MountS3: true},
		{Name: "negative-metadata-ttl", Value: true, Example: "60", MountS3: true},
		{Name: "max-cache-size", Value: true, Requires: "cache", Example: "1024", MountS3: true},
		{Name: "cache-xz", Value: true, Example: "cache--usw2-az1--x-s3", MountS3: true},
		// Advanced options.
		{Name: "user-agent-prefix", Value: true, Example: "my-app", MountS3: true, Node: Rewrite,
			Reason: "replaced by the driver's own user agent, as upstream does"},
		// The CSI driver's own options, not mount-s3's.
		{Name: "aws-max-attempts", Value: true, Example: "5", Node: Rewrite, Reason: "becomes AWS_MAX_ATTEMPTS in Mountpoint's environment"},
		{Name: "run-as-user", Value: true, Example: "1000", Node: Drop},
		{Name: "o", Value: true, Example: "allow_other", Node: Refuse,
			Reason: "fstab-style -o options are not supported by the CSI driver; list each option on its own"},
		{Name: "ca-bundle", Value: true, Example: "/etc/ssl/ca.pem", Node: Refuse,
			Reason: "not a Mountpoint option; the CSI driver refuses it (set AWS_CA_BUNDLE for the Mountpoint Pod instead)"},
	}
	sort.Slice(opts, func(i, j int) bool { return opts[i].Name < opts[j].Name })
	return opts
}

// Lookup finds an option by its long name or its short alias, without dashes.
func Lookup(name string) (Option, bool) {
	for _, o := range All() {
		if o.Name == name || (o.Short != "" && o.Short == name) {
			return o, true
		}
	}
	return Option{}, false
}

// Flag returns how the option is written on a command line: "--name", or "-o" for a one-letter name.
func (o Option) Flag() string {
	if len(o.Name) == 1 {
		return "-" + o.Name
	}
	return "--" + o.Name
}

// Arg returns the option as one "--k=v" (or "--k") argument with its Example value.
func (o Option) Arg() string {
	if o.Value {
		return o.Flag() + "=" + o.Example
	}
	return o.Flag()
}

// Args returns the option's Arg and, before it, the Arg of the option it requires: a command line mount-s3
// accepts.
func (o Option) Args() []string {
	if r, ok := Lookup(o.Requires); ok && o.Requires != "" {
		return []string{r.Arg(), o.Arg()}
	}
	return []string{o.Arg()}
}
