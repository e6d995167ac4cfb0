package mount

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// A /dev/fd/N mountpoint that is not an open /dev/fuse is refused before go-fuse could mount over the path it
// resolves to (which, with N closed, can be the machine's /dev/fuse itself).
func TestCheckFUSEFdRefusesWhatIsNotAnOpenFUSEDevice(t *testing.T) {
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	closed, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	closedFd := closed.Fd()
	closed.Close()
	for name, tc := range map[string]struct{ mountPoint, want string }{
		"another device": {"/dev/fd/" + strconv.Itoa(int(null.Fd())), "is not /dev/fuse"},
		"closed fd":      {"/dev/fd/" + strconv.Itoa(int(closedFd)), "is not open"},
	} {
		t.Run(name, func(t *testing.T) {
			if err := checkFUSEFd(tc.mountPoint); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("checkFUSEFd(%s) = %v, want an error containing %q", tc.mountPoint, err, tc.want)
			}
		})
	}
}
