//go:build bench

package s3fuse

import (
	"bytes"
	"context"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stowage-csi/stowage/e2e/rig"
	"github.com/stowage-csi/stowage/e2e/s3server"
)

// cpuTime returns the CPU a process has used so far, summed over its threads in nanoseconds from
// /proc/<pid>/task/*/schedstat (/proc/<pid>/stat counts 10 ms ticks, too coarse for a 256 MiB
// transfer), and its minor page faults (fresh memory being touched).
func cpuTime(pid int) (cpu time.Duration, faults int64, err error) {
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	if err != nil {
		return 0, 0, err
	}
	for _, p := range tasks {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // the thread ended
		}
		f := strings.Fields(string(b))
		if len(f) == 0 {
			continue
		}
		ns, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("parse %s: %w", p, err)
		}
		cpu += time.Duration(ns)
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, err
	}
	// Fields after the command name, which is in parentheses and may contain spaces.
	st := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
	if len(st) < 8 {
		return 0, 0, fmt.Errorf("short /proc/%d/stat", pid)
	}
	faults, err = strconv.ParseInt(st[7], 10, 64)
	return cpu, faults, err
}

// serverPid finds the versitygw serving srv (its command line names the endpoint's port).
func serverPid(t *testing.T, srv *s3server.Server) int {
	port := srv.Endpoint[strings.LastIndexByte(srv.Endpoint, ':')+1:]
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmd, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && bytes.Contains(cmd, []byte("versitygw")) && bytes.Contains(cmd, []byte("127.0.0.1:"+port)) {
			return pid
		}
	}
	t.Fatalf("no versitygw process for %s", srv.Endpoint)
	return 0
}

// cpuSpent is the CPU each process used during one workload, per MiB moved.
type cpuSpent struct {
	fuse, server, app time.Duration
	wall              time.Duration
	// fuseFaults counts s3-fuse's minor page faults: buffers that were not recycled.
	fuseFaults int64
}

func (c cpuSpent) String() string {
	per := func(d time.Duration) string {
		return fmt.Sprintf("%6.2f ms", float64(d.Microseconds())/1000/(benchSize>>20))
	}
	return fmt.Sprintf("%7.0f MiB/s  CPU per MiB: s3-fuse %s, versitygw %s, reader/writer %s; s3-fuse page faults %d",
		mibps(benchSize, c.wall), per(c.fuse), per(c.server), per(c.app), c.fuseFaults)
}

// measureCPU runs work and returns the CPU s3-fuse, the server and this process used meanwhile. With
// S3FUSE_PERF=<dir> set, it also records a perf profile of s3-fuse into that directory.
func measureCPU(t *testing.T, name string, fusePid, srvPid int, work func()) cpuSpent {
	var perfs []*exec.Cmd
	if dir := os.Getenv("S3FUSE_PERF"); dir != "" {
		for who, pid := range map[string]int{"s3-fuse": fusePid, "versitygw": srvPid} {
			perf := exec.Command("perf", "record", "-g", "-o", filepath.Join(dir, name+"."+who+".perf.data"), "-p", strconv.Itoa(pid))
			if err := perf.Start(); err != nil {
				t.Fatal(err)
			}
			perfs = append(perfs, perf)
			// Work done before perf has attached would be missing from the profile.
			rig.Eventually(t, context.Background(), 30*time.Second, "perf to attach to "+who, func(context.Context) (bool, error) {
				return perfAttached(perf.Process.Pid)
			})
		}
	}
	self := os.Getpid()
	f0, ff0, _ := cpuTime(fusePid)
	s0, _, _ := cpuTime(srvPid)
	a0, _, _ := cpuTime(self)
	start := time.Now()
	work()
	wall := time.Since(start)
	f1, ff1, _ := cpuTime(fusePid)
	s1, _, _ := cpuTime(srvPid)
	a1, _, _ := cpuTime(self)
	for _, perf := range perfs {
		_ = perf.Process.Signal(os.Interrupt)
		_ = perf.Wait()
	}
	return cpuSpent{fuse: f1 - f0, server: s1 - s0, app: a1 - a0, wall: wall, fuseFaults: ff1 - ff0}
}

// perfAttached reports whether perf record has opened its perf_event descriptors, which it does once it
// has attached to the process it records.
func perfAttached(perfPid int) (bool, error) {
	fds, err := filepath.Glob(fmt.Sprintf("/proc/%d/fd/*", perfPid))
	if err != nil {
		return false, err
	}
	for _, fd := range fds {
		if target, err := os.Readlink(fd); err == nil && target == "anon_inode:[perf_event]" {
			return true, nil
		}
	}
	return false, fmt.Errorf("perf (pid %d) has no perf_event descriptor yet", perfPid)
}

// TestBenchS3FuseCPU reports where the CPU of a 256 MiB sequential read and write through s3-fuse
// goes: s3-fuse, versitygw, and the reading/writing process (the kernel's FUSE copies are charged to
// the thread that makes them). On 2 shared cores CPU per byte is what bounds throughput. Nothing is
// asserted about timing.
func TestBenchS3FuseCPU(t *testing.T) {
	srv := s3server.Start(t)
	bucket := newBucket(t, srv)
	data := make([]byte, benchSize)
	rand.New(rand.NewSource(256)).Read(data)
	src := filepath.Join(t.TempDir(), "src.bin")
	if err := os.WriteFile(src, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := sdkUpload(context.Background(), srv.Client, bucket, "seq.bin", data, 16<<20); err != nil {
		t.Fatal(err)
	}
	srvPid := serverPid(t, srv)
	// S3FUSE_BASELINE=<s3-fuse binary> measures that build too, in the same rounds, for before/after
	// comparisons on a machine whose load changes from minute to minute; S3FUSE_BASELINE_ARGS adds
	// options to the baseline's command line (the current build as baseline compares options).
	type build struct {
		name, path string
		args       []string
	}
	builds := []build{{"s3-fuse", binary, nil}}
	if base := os.Getenv("S3FUSE_BASELINE"); base != "" {
		builds = append([]build{{"baseline", base, strings.Fields(os.Getenv("S3FUSE_BASELINE_ARGS"))}}, builds...)
	}
	for round := 0; round < benchRuns; round++ {
		for _, b := range builds {
			m := mountBinary(t, b.path, srv, bucket, append([]string{"--allow-overwrite"}, b.args...)...)
			pid := m.cmd.Process.Pid
			r := measureCPU(t, fmt.Sprintf("%s-read-%d", b.name, round), pid, srvPid, func() {
				if n, _, err := readFile(filepath.Join(m.Dir, "seq.bin"), false); err != nil || n != benchSize {
					t.Fatalf("read: n=%d err=%v", n, err)
				}
			})
			w := measureCPU(t, fmt.Sprintf("%s-write-%d", b.name, round), pid, srvPid, func() {
				if err := copyFile(src, filepath.Join(m.Dir, fmt.Sprintf("w-%s-%d.bin", b.name, round))); err != nil {
					t.Fatalf("write: %v", err)
				}
			})
			// Each build writes its own key: overwriting another build's object costs the server more.
			m.stop(t)
			fmt.Printf("round %d %-8s read : %s\nround %d %-8s write: %s\n", round, b.name, r, round, b.name, w)
		}
	}
}
