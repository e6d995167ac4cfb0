package rig

import (
	"errors"
	"os/exec"
	"syscall"
	"testing"
)

func TestKilledBy(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	terminated := cmd.Wait()
	if !KilledBy(terminated, syscall.SIGTERM) {
		t.Errorf("KilledBy(%v, SIGTERM) = false for a process ended by SIGTERM", terminated)
	}
	if KilledBy(terminated, syscall.SIGKILL) {
		t.Errorf("KilledBy(%v, SIGKILL) = true for a process ended by SIGTERM", terminated)
	}
	failed := exec.Command("false").Run()
	for _, err := range []error{nil, failed, errors.New("signal: terminated")} {
		if KilledBy(err, syscall.SIGTERM) {
			t.Errorf("KilledBy(%v, SIGTERM) = true, want false", err)
		}
	}
}
