package mountoptions

import (
	"fmt"
	"sort"
	"strings"
)

// kind says whether an option takes a value.
type kind int

const (
	flag  kind = iota // --k, no value
	value             // --k=v, a value required
)

func (k kind) check(key, v string) error {
	switch {
	case k == flag && v != "":
		return fmt.Errorf("%s takes no value", key)
	case k == value && v == "":
		return fmt.Errorf("%s needs a value", key)
	}
	return nil
}

// allowed is every Mountpoint option a workload may set (mount-s3 --help of Mountpoint 1.x, and the
// options upstream's documentation and examples use). Options that would let a volume escape the node's
// control (--profile next to the node's credentials, --auto-unmount, log files outside the Pod's view of
// itself) are left out on purpose.
var allowed = map[string]kind{
	// Bucket and endpoint.
	"--prefix": value, "--region": value, "--endpoint-url": value, "--force-path-style": flag,
	"--transfer-acceleration": flag, "--dual-stack": flag, "--requester-pays": flag,
	"--expected-bucket-owner": value, "--no-sign-request": flag, "--bind": value,
	// Writes.
	"--read-only": flag, "--allow-delete": flag, "--allow-overwrite": flag, "--incremental-upload": flag,
	"--storage-class": value, "--sse": value, "--sse-kms-key-id": value, "--upload-checksums": value,
	// Ownership and access.
	"--uid": value, "--gid": value, "--dir-mode": value, "--file-mode": value,
	"--allow-other": flag, "--allow-root": flag,
	// Caching.
	"--cache": value, "--metadata-ttl": value, "--max-cache-size": value,
	"--cache-xz": value,
	// Throughput.
	"--maximum-throughput-gbps": value, "--max-threads": value, "--part-size": value,
	"--read-part-size": value, "--write-part-size": value, "--aws-max-attempts": value,
	// Logging and metrics.
	"--debug": flag, "--debug-crt": flag, "--log-metrics": flag, "--no-log": flag, "--log-directory": value,
	"--otlp-endpoint": value,
	// Forced by the node; accepted so that manifests written for upstream keep working.
	"--user-agent-prefix": value,
}

// dropped are accepted and ignored, as upstream: the node decides how Mountpoint runs.
var dropped = map[string]struct{}{
	"--foreground": {}, "-f": {}, "--help": {}, "-h": {}, "--version": {}, "-v": {}, "-V": {},
}

// refused are rejected with a reason, as upstream rejects them.
var refused = map[string]string{
	"-o":          "fstab-style -o options are not Mountpoint options; list each option on its own",
	"--ca-bundle": "a CA bundle path would name a file on the node, which the Mountpoint Pod cannot read",
}

// AllowedList names the allowed options, sorted, for error messages and the README.
func AllowedList() string {
	names := make([]string, 0, len(allowed))
	for k := range allowed {
		names = append(names, strings.TrimPrefix(k, "--"))
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}
