package ebsstack

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
)

// writeSynced writes data as the whole file at path and syncs it to the device.
func writeSynced(path string, data []byte) error {
	return writeFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, data, 0)
}

// writeAt writes data at off of the existing file or device at path and syncs it.
func writeAt(path string, data []byte, off int64) error {
	return writeFile(path, os.O_WRONLY, data, off)
}

func writeFile(path string, flag int, data []byte, off int64) error {
	f, err := os.OpenFile(path, flag, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.WriteAt(data, off); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func readAt(path string, n int, off int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, n)
	if _, err := f.ReadAt(b, off); err != nil {
		return nil, err
	}
	return b, nil
}

// holds checks that path holds want at off; mismatch is the error's text when the bytes differ.
func holds(path string, want []byte, off int64, mismatch string) error {
	got, err := readAt(path, len(want), off)
	if err != nil {
		return err
	}
	if !bytes.Equal(got, want) {
		return errors.New(mismatch)
	}
	return nil
}

// digest is the hex SHA-256 of b.
func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
