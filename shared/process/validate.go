package process

import (
	"fmt"
	"io"
	"strconv"

	"k8s.io/component-base/featuregate"
	logsapi "k8s.io/component-base/logs/api/v1"
)

// ValidateOnlyEnv is the environment variable that turns a start into a check of the configuration: with it
// true, a binary parses its flags and environment and runs every check its normal start runs before it
// dials or serves anything, then prints "<binary>: configuration valid" and exits 0, or exits non-zero naming
// the bad setting. It is an environment variable, not a flag, so that no binary has a flag upstream's lacks
// and --version alone keeps printing the version, as upstream's does.
//
// Checks that need the network (the API server, the CSI driver, EC2, instance metadata) or what only a running
// Pod has (the in-cluster service account, mounted Secrets) are not part of it.
const ValidateOnlyEnv = "STOWAGE_VALIDATE_ONLY"

// EndIfValidateOnly is called by a binary's start-up once its configuration has passed every check that needs
// no network. When getenv's ValidateOnlyEnv is true it writes the "configuration valid" line to stdout and
// returns done, and the binary exits 0 without starting. An unset or empty variable is a normal start; a value
// strconv.ParseBool does not read is a UsageError, so that a misspelt check never starts the binary for real.
func EndIfValidateOnly(getenv func(string) string, stdout io.Writer, binary string) (done bool, err error) {
	v := getenv(ValidateOnlyEnv)
	if v == "" {
		return false, nil
	}
	on, err := strconv.ParseBool(v)
	if err != nil {
		return false, UsageError{Err: fmt.Errorf("environment variable %s=%q is not a boolean", ValidateOnlyEnv, v)}
	}
	if !on {
		return false, nil
	}
	if _, err := fmt.Fprintf(stdout, "%s: configuration valid\n", binary); err != nil {
		return false, err
	}
	return true, nil
}

// CheckLogging validates the logging flags against gates without applying them, for a validate-only run of a
// binary that applies them only once it starts for real. gates may be nil.
func CheckLogging(logging *logsapi.LoggingConfiguration, gates featuregate.FeatureGate) error {
	return logsapi.Validate(logging, gates, nil).ToAggregate()
}
