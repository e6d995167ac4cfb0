package rig

import (
	"os"
	"strconv"
	"testing"
)

// EnvCount returns the positive number in the environment variable name, or def when it is unset; a
// benchmark's size or rounds can so be changed without editing it. Anything else fails the test.
func EnvCount(t testing.TB, name string, def int) int {
	t.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	v, err := strconv.Atoi(s)
	if err != nil || v < 1 {
		t.Fatalf("%s=%q is not a positive number", name, s)
	}
	return v
}
