package s3install

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

func TestStopRemovesOnlyTheDirectoryStartMadeAndOnlyOnce(t *testing.T) {
	ctx := context.Background()
	made := filepath.Join(t.TempDir(), "made")
	if err := os.Mkdir(made, 0o755); err != nil {
		t.Fatal(err)
	}
	s := &Stack{dir: made, ownDir: true}
	if err := s.Stop(ctx); err != nil {
		t.Fatalf("first Stop: %v", err)
	}
	if _, err := os.Stat(made); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the directory Start made is still there after Stop (stat: %v)", err)
	}
	// A directory of the same name made again is not Stop's any more: the second call does nothing.
	if err := os.Mkdir(made, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := s.Stop(ctx); err != nil {
		t.Errorf("second Stop: %v", err)
	}
	if _, err := os.Stat(made); err != nil {
		t.Errorf("a second Stop removed %s: %v", made, err)
	}

	given := t.TempDir()
	if err := (&Stack{dir: given}).Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(given); err != nil {
		t.Errorf("Stop removed the caller's Options.Dir: %v", err)
	}
}
