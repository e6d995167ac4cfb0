package leaderelection

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
)

// ServiceAccountNamespaceFile is where a pod finds its own namespace.
const ServiceAccountNamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// LockName returns the Lease name for a sidecar, with upstream's rule so Stowage and upstream replicas of one
// Deployment contend for the same Lease during a rolling switch: prefix+driver, every character outside
// [a-zA-Z0-9-] replaced by '-', and an 'X' appended if the result ends in '-'. Upstream prefixes:
// attacher "external-attacher-leader-", provisioner "" (just the driver), resizer "external-resizer-",
// csi-snapshotter "external-snapshotter-leader-".
func LockName(prefix, driver string) string {
	name := []byte(prefix + driver)
	for i, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
			name[i] = '-'
		}
	}
	if len(name) > 0 && name[len(name)-1] == '-' {
		name = append(name, 'X')
	}
	return string(name)
}

// ResolveNamespace picks the Lease namespace like upstream: the flag, then $POD_NAMESPACE, then the service
// account namespace file (pass ServiceAccountNamespaceFile), then "default".
func ResolveNamespace(flagValue, saNamespaceFile string) string {
	if flagValue != "" {
		return flagValue
	}
	if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
		return ns
	}
	if data, err := os.ReadFile(saNamespaceFile); err == nil {
		if ns := strings.TrimSpace(string(data)); ns != "" {
			return ns
		}
	}
	return "default"
}

// DefaultIdentity is "<hostname>_<random>". Upstream uses the bare hostname, which lets two candidates on one
// host (hostNetwork pods, tests) both believe they hold the Lease; the suffix keeps identities unique while the
// pod name stays readable in holderIdentity.
func DefaultIdentity() (string, error) {
	host, err := os.Hostname()
	if err != nil {
		return "", fmt.Errorf("getting the hostname for the leader election identity: %w", err)
	}
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("generating the leader election identity: %w", err)
	}
	return host + "_" + hex.EncodeToString(b[:]), nil
}
