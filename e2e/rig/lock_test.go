package rig

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"
)

func TestLockFileExcludesUntilUnlocked(t *testing.T) {
	path := filepath.Join(t.TempDir(), ".lock")
	unlock, err := LockFile(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	// flock belongs to the open file, so a second LockFile in the same process has to wait like another
	// process would.
	short, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, err := LockFile(short, path); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("LockFile while held = %v, want the context's deadline", err)
	}
	unlock()
	again, err := LockFile(context.Background(), path)
	if err != nil {
		t.Fatalf("LockFile after unlock: %v", err)
	}
	again()
}

func TestLockFileFailsOnAMissingFolder(t *testing.T) {
	if _, err := LockFile(context.Background(), filepath.Join(t.TempDir(), "missing", ".lock")); err == nil {
		t.Fatal("LockFile in a missing folder succeeded, want an error")
	}
}
