package process

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	logsapi "k8s.io/component-base/logs/api/v1"
)

func TestEndIfValidateOnly(t *testing.T) {
	for _, tc := range []struct {
		value, wantOut, wantErr string
		wantDone                bool
	}{
		{value: "", wantDone: false},
		{value: "0", wantDone: false},
		{value: "false", wantDone: false},
		{value: "1", wantDone: true, wantOut: "testbin: configuration valid\n"},
		{value: "true", wantDone: true, wantOut: "testbin: configuration valid\n"},
		{value: "yes", wantErr: `environment variable STOWAGE_VALIDATE_ONLY="yes" is not a boolean`},
	} {
		t.Run(tc.value, func(t *testing.T) {
			var out bytes.Buffer
			getenv := func(name string) string {
				if name != ValidateOnlyEnv {
					t.Errorf("read %s, want only %s", name, ValidateOnlyEnv)
				}
				return tc.value
			}
			done, err := EndIfValidateOnly(getenv, &out, "testbin")
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr || !errors.As(err, new(UsageError)) {
					t.Fatalf("error %v, want the UsageError %q", err, tc.wantErr)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if done != tc.wantDone || out.String() != tc.wantOut {
				t.Errorf("done %t, stdout %q; want %t and %q", done, out.String(), tc.wantDone, tc.wantOut)
			}
		})
	}
}

func TestCheckLoggingValidatesWithoutApplying(t *testing.T) {
	good := logsapi.NewLoggingConfiguration()
	if err := CheckLogging(good, nil); err != nil {
		t.Errorf("default logging configuration: %v", err)
	}
	bad := logsapi.NewLoggingConfiguration()
	bad.Format = "xml"
	if err := CheckLogging(bad, nil); err == nil || !strings.Contains(err.Error(), "format") {
		t.Errorf("format xml: %v, want an error naming the format", err)
	}
	// Nothing was applied: component-base refuses to apply a configuration that differs from one applied before
	// in the process, so applying another after a checked one only works if the check applied nothing.
	verbose := logsapi.NewLoggingConfiguration()
	verbose.Verbosity = 5
	if err := CheckLogging(verbose, nil); err != nil {
		t.Fatalf("-v=5: %v", err)
	}
	resetLogging(t)
	if err := logsapi.ValidateAndApply(good, nil); err != nil {
		t.Errorf("applying another configuration after the checks: %v", err)
	}
}
