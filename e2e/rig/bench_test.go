package rig

import (
	"testing"
)

func TestEnvCount(t *testing.T) {
	t.Setenv("RIG_TEST_N", "")
	if got := EnvCount(t, "RIG_TEST_N", 7); got != 7 {
		t.Errorf("unset: %d, want the default 7", got)
	}
	t.Setenv("RIG_TEST_N", "12")
	if got := EnvCount(t, "RIG_TEST_N", 7); got != 12 {
		t.Errorf("RIG_TEST_N=12: %d", got)
	}
}
