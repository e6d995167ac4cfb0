// Package flagtest parses a node sidecar's command line in its tests as the binary does: process.Flags and
// the sidecar's own in one flag set, then the configuration's Validate.
package flagtest

import (
	"flag"
	"strings"
	"testing"

	"github.com/stowage-csi/stowage/node-sidecars/internal/command"
	"github.com/stowage-csi/stowage/shared/process"
)

// Parse parses args into the configuration addFlags registers and returns it with Validate's error; args that
// do not parse fail the test.
func Parse[C any, P command.Config[C]](t *testing.T, binary string, addFlags func(*flag.FlagSet) P, args []string) (P, error) {
	t.Helper()
	fs := flag.NewFlagSet(binary, flag.ContinueOnError)
	process.AddFlags(fs)
	cfg := addFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatalf("parse %q: %v", args, err)
	}
	return cfg, cfg.Validate()
}

// Refused checks Validate's error against want, the part of the message a case expects ("" for none), and
// reports whether the case expected a refusal, so that it checks the configuration only when there is one.
func Refused(t *testing.T, err error, want string) bool {
	t.Helper()
	if want != "" {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate: %v, want an error containing %q", err, want)
		}
		return true
	}
	if err != nil {
		t.Fatalf("Validate: %v", err)
	}
	return false
}
