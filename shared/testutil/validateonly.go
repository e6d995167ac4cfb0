package testutil

import "github.com/stowage-csi/stowage/shared/process"

// ValidateOnlyGetenv is a getenv for a main's run under test: env's values, and otherwise
// STOWAGE_VALIDATE_ONLY=1, so a run checks its configuration and ends without serving.
func ValidateOnlyGetenv(env map[string]string) func(string) string {
	return func(k string) string {
		if v, ok := env[k]; ok {
			return v
		}
		if k == process.ValidateOnlyEnv {
			return "1"
		}
		return ""
	}
}
