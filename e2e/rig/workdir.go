package rig

import (
	"errors"
	"os"
	"path/filepath"
)

// WorkingRepoRoot is RepoRoot of the process's working directory: where a test or the demo runs from.
func WorkingRepoRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	return RepoRoot(wd)
}

// Workdir prepares a stack's working folder with the logs, bin and sock folders every stack writes into: dir
// when it is set, else a new temporary folder named after prefix, which created reports so that the stack
// removes it when it stops. A temporary folder is removed again when the preparation fails.
func Workdir(dir, prefix string) (path string, created bool, err error) {
	if dir == "" {
		if dir, err = os.MkdirTemp("", prefix); err != nil {
			return "", false, err
		}
		created = true
	}
	for _, d := range []string{"logs", "bin", "sock"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			if created {
				err = errors.Join(err, os.RemoveAll(dir))
			}
			return "", false, err
		}
	}
	return dir, created, nil
}
