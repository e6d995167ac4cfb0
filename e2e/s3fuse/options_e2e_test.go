//go:build e2e

package s3fuse

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stowage-csi/stowage/shared/mountpointopts"
)

// checkArgs runs the built s3-fuse with --check-args (parse and validate, no mount) and returns its exit
// code and stderr.
func checkArgs(t *testing.T, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, append(args, "--check-args")...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0, stderr.String()
	case errors.As(err, &exit):
		return exit.ExitCode(), stderr.String()
	}
	t.Fatalf("run s3-fuse %q: %v", args, err)
	return 0, ""
}

// nodeForwards is what the S3 node sends Mountpoint for one option under the list's policy: nil when it
// drops the option, the rewritten form when it rewrites it (read-only goes to the kernel mount, the cache
// to the Pod's cache volume, the user agent to the driver's, --aws-max-attempts to the environment).
func nodeForwards(o mountpointopts.Option) []string {
	switch {
	case o.Node == mountpointopts.Drop:
		return nil
	case o.Node == mountpointopts.Rewrite && o.Name == "cache":
		return []string{"--cache=/local-cache"}
	case o.Node == mountpointopts.Rewrite && o.Name == "user-agent-prefix":
		return []string{"--user-agent-prefix=s3-csi-driver/stowage credential-source#driver"}
	case o.Node == mountpointopts.Rewrite:
		return nil
	}
	return o.Args()
}

// TestE2EMountOptionsWalk takes every option of Mountpoint's list (shared/mountpointopts, from which the
// S3 node's allow-list is built; s3-node's TestParseFollowsMountpointsList checks the node against it)
// through s3-fuse as the node's Mountpoint Pod runs it (`<bucket> /dev/fd/3 --foreground <args>`): what the
// node passes or rewrites, s3-fuse must accept; what the node refuses, s3-fuse (like mount-s3) must refuse
// too, so the node refuses exactly what would fail later. Each option with a malformed shape must be
// refused with exit 2 and its name.
func TestE2EMountOptionsWalk(t *testing.T) {
	base := []string{"b1b", "/dev/fd/3", "--foreground"}
	for _, o := range mountpointopts.All() {
		t.Run(o.Name, func(t *testing.T) {
			switch o.Node {
			case mountpointopts.Refuse:
				code, stderr := checkArgs(t, append(base, o.Args()...)...)
				if code != 2 || !strings.Contains(stderr, o.Flag()) {
					t.Fatalf("s3-fuse %s: exit %d, %q; the node refuses it, so s3-fuse must exit 2 naming it", o.Arg(), code, stderr)
				}
				return
			case mountpointopts.Drop:
				if name := o.Name; name == "help" || name == "version" || !o.MountS3 {
					return // dropped before Mountpoint runs; they print and exit, or are not Mountpoint's
				}
			}
			args := append(append([]string{}, base...), nodeForwards(o)...)
			code, stderr := checkArgs(t, args...)
			if code != 0 {
				t.Fatalf("s3-fuse %q: exit %d: %s", args, code, stderr)
			}
			if strings.Contains(stderr, "warning:") && !strings.Contains(stderr, o.Flag()) && (o.Requires == "" || !strings.Contains(stderr, "--"+o.Requires)) {
				t.Fatalf("s3-fuse %q warned about another option: %s", args, stderr)
			}
			if !o.MountS3 || o.Node == mountpointopts.Rewrite {
				return
			}
			bad := append(append([]string{}, base...), o.Flag()+"=x")
			if o.Value {
				bad = append(append([]string{}, base...), o.Flag())
			}
			code, stderr = checkArgs(t, bad...)
			if code != 2 || !strings.Contains(stderr, o.Flag()) {
				t.Fatalf("s3-fuse %q: exit %d, %q; want exit 2 naming %s", bad, code, stderr, o.Flag())
			}
		})
	}
}
