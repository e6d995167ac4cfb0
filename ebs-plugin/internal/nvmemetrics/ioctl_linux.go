//go:build linux

package nvmemetrics

import (
	"fmt"
	"os"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// adminCommand is struct nvme_admin_cmd of <linux/nvme_ioctl.h>, 72 bytes.
type adminCommand struct {
	opcode      uint8
	flags       uint8
	rsvd1       uint16
	nsid        uint32
	cdw2        uint32
	cdw3        uint32
	metadata    uint64
	addr        uint64
	metadataLen uint32
	dataLen     uint32
	cdw10       uint32
	cdw11       uint32
	cdw12       uint32
	cdw13       uint32
	cdw14       uint32
	cdw15       uint32
	timeoutMs   uint32
	result      uint32
}

const (
	// nvmeIoctlAdminCmd is _IOWR('N', 0x41, struct nvme_admin_cmd).
	nvmeIoctlAdminCmd = 0xC0484E41
	opGetLogPage      = 0x02
)

// ReadLogPage reads the EBS log page of the NVMe device at path with the Get Log Page admin command.
func (s *System) ReadLogPage(path string) ([]byte, error) {
	// Read-write, as upstream opens it: the node plugin is privileged, and the kernel allows some admin
	// passthrough only on a descriptor open for writing.
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", path, err)
	}
	defer func() { _ = f.Close() }()
	// page is returned, so it lives on the heap, which never moves it: the address handed to the kernel
	// stays valid.
	page := make([]byte, LogPageSize)
	cmd := adminCommand{
		opcode:  opGetLogPage,
		nsid:    1,
		addr:    uint64(uintptr(unsafe.Pointer(&page[0]))),
		dataLen: LogPageSize,
		// The log page ID, and in the upper half the number of dwords to read less one (zero-based).
		cdw10: LogPageID | (LogPageSize/4-1)<<16,
	}
	conn, err := f.SyscallConn()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var status uintptr
	var errno unix.Errno
	if err := conn.Control(func(fd uintptr) {
		status, _, errno = unix.Syscall(unix.SYS_IOCTL, fd, nvmeIoctlAdminCmd, uintptr(unsafe.Pointer(&cmd)))
	}); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	// The kernel wrote into page through the address in cmd, which the garbage collector cannot see.
	runtime.KeepAlive(page)
	if errno != 0 {
		return nil, fmt.Errorf("get log page %#x from %s: %w", LogPageID, path, errno)
	}
	if status != 0 {
		return nil, fmt.Errorf("get log page %#x from %s: NVMe status %#x", LogPageID, path, status)
	}
	return page, nil
}
