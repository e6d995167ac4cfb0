package mount

import (
	"fmt"
	"os"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// kernelReadAheadKiB is the readahead s3-fuse asks the kernel for on its mount. The FUSE default of
// 128 KiB keeps one 1 MiB read in flight; 4 MiB lets the kernel send several at once, which overlaps
// the copies in the kernel with our replies (measured best of 128 KiB..8 MiB on 2 cores).
const kernelReadAheadKiB = 4096

// setReadAhead raises the readahead of the mount's backing device (/sys/class/bdi/MAJ:MIN). Only root
// may; for a /dev/fd/N mount the privileged parent that mounted it can do the same.
func setReadAhead(mountPoint string, kib int) error {
	var st syscall.Stat_t
	if err := syscall.Stat(mountPoint, &st); err != nil {
		return err
	}
	p := fmt.Sprintf("/sys/class/bdi/%d:%d/read_ahead_kb", unix.Major(st.Dev), unix.Minor(st.Dev))
	return os.WriteFile(p, []byte(strconv.Itoa(kib)), 0o644)
}
