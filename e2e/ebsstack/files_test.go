package ebsstack

import (
	"path/filepath"
	"testing"
)

func TestWriteAtKeepsTheRestOfTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	if err := writeSynced(path, []byte("aaaaaaaa")); err != nil {
		t.Fatal(err)
	}
	if err := writeAt(path, []byte("bb"), 3); err != nil {
		t.Fatal(err)
	}
	if err := holds(path, []byte("aaabbaaa"), 0, "mismatch"); err != nil {
		t.Fatalf("holds = %v, want the whole file to be aaabbaaa", err)
	}
	if err := holds(path, []byte("aa"), 3, "mismatch"); err == nil || err.Error() != "mismatch" {
		t.Fatalf("holds of other bytes = %v, want the mismatch text", err)
	}
	if err := writeSynced(path, []byte("c")); err != nil {
		t.Fatal(err)
	}
	if err := holds(path, []byte("cc"), 0, "mismatch"); err == nil || err.Error() == "mismatch" {
		t.Fatalf("holds past the end of a truncated file = %v, want a read error", err)
	}
}
