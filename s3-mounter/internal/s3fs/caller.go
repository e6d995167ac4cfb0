package s3fs

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// callerProcess returns the process (thread group) that made a FUSE request. The kernel reports the
// calling thread's ID, so a multi-threaded program that writes from one thread and closes from
// another would otherwise look like two processes. When /proc cannot tell (another PID namespace),
// the thread ID itself is used.
func callerProcess(ctx context.Context) uint32 {
	c, ok := fuse.FromContext(ctx)
	if !ok {
		return 0
	}
	return threadGroup(c.Pid)
}

func threadGroup(tid uint32) uint32 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", tid))
	if err != nil {
		return tid
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "Tgid:"); ok {
			if n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 32); err == nil {
				return uint32(n)
			}
		}
	}
	return tid
}
