package ebsstack

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// mountFSType is the file-system type mounted at path in the mount table mountinfo (a /proc/<pid>/mountinfo),
// or "" if nothing is.
func mountFSType(mountinfo, path string) (string, error) {
	b, err := os.ReadFile(mountinfo)
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(b), "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		f, g := strings.Fields(pre), strings.Fields(post)
		if ok && len(f) > 4 && len(g) > 0 && f[4] == path {
			return g[0], nil
		}
	}
	return "", nil
}

// LoopDevicesUnder lists the loop devices whose backing file lies below dir.
func LoopDevicesUnder(dir string) []string {
	files, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
	var out []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err == nil && strings.HasPrefix(strings.TrimSpace(string(b)), filepath.Clean(dir)+"/") {
			out = append(out, "/dev/"+filepath.Base(filepath.Dir(filepath.Dir(f))))
		}
	}
	return out
}

// checkFSType fails unless a file system of type want is mounted at path of node; what names path in the
// error.
func checkFSType(node PlatformNode, what, path, want string) error {
	if fs, err := node.FSType(path); err != nil || fs != want {
		return fmt.Errorf("%s has %q mounted, want %s (%v)", what, fs, want, err)
	}
	return nil
}
