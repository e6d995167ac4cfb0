//go:build e2e

package s3chart_test

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stowage-csi/stowage/e2e/node"
	"github.com/stowage-csi/stowage/e2e/rig"
	"github.com/stowage-csi/stowage/e2e/s3install"
)

// mount is one line of a mountinfo.
type mount struct {
	target, fstype, minor string
}

// nodeMountinfo reads the mounts of the node's mount namespace through one of its processes (one whose
// command line names the node's state directory and whose mount namespace is not this test's).
func nodeMountinfo(t *testing.T, n *node.Node) []mount {
	t.Helper()
	procs, err := rig.ProcessesWith(n.StateDir())
	if err != nil {
		t.Fatal(err)
	}
	own, err := os.Readlink("/proc/self/ns/mnt")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range procs {
		pid, _, _ := strings.Cut(p, ":")
		if ns, err := os.Readlink(filepath.Join("/proc", pid, "ns", "mnt")); err != nil || ns == own {
			continue
		}
		mounts, err := readMountinfo(filepath.Join("/proc", pid, "mountinfo"))
		if err != nil {
			continue // the process ended between the listing and the read
		}
		return mounts
	}
	t.Fatalf("no process of node %s in its own mount namespace among %v", n.Name, procs)
	return nil
}

func readMountinfo(path string) ([]mount, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []mount
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for s.Scan() {
		pre, post, ok := strings.Cut(s.Text(), " - ")
		fields, tail := strings.Fields(pre), strings.Fields(post)
		if !ok || len(fields) < 5 || len(tail) < 1 {
			continue
		}
		_, minor, _ := strings.Cut(fields[2], ":")
		out = append(out, mount{target: fields[4], fstype: tail[0], minor: minor})
	}
	return out, s.Err()
}

// fuseMounts are the node's FUSE mounts.
func fuseMounts(t *testing.T, n *node.Node) []mount {
	t.Helper()
	var out []mount
	for _, m := range nodeMountinfo(t, n) {
		if m.fstype == "fuse" || strings.HasPrefix(m.fstype, "fuse.") {
			out = append(out, m)
		}
	}
	return out
}

// nodeMounts are the node's mounts at or under dir.
func nodeMounts(t *testing.T, n *node.Node, dir string) []mount {
	t.Helper()
	var out []mount
	for _, m := range nodeMountinfo(t, n) {
		if m.target == dir || strings.HasPrefix(m.target, dir+"/") {
			out = append(out, m)
		}
	}
	return out
}

// processesInCgroup lists the PIDs on this machine whose cgroup path names the container ID.
func processesInCgroup(t *testing.T, containerID string) []string {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		cg, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cgroup"))
		if err == nil && strings.Contains(string(cg), containerID) {
			out = append(out, e.Name())
		}
	}
	return out
}

// processUID is the real user ID of the process.
func processUID(t *testing.T, pid string) string {
	t.Helper()
	status, err := os.ReadFile(filepath.Join("/proc", pid, "status"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, "Uid:"); ok {
			if f := strings.Fields(rest); len(f) > 0 {
				return f[0]
			}
		}
	}
	t.Fatalf("no Uid line in /proc/%s/status", pid)
	return ""
}

// checkTeardown stops the stack (versitygw and the cluster) and checks that nothing of the nodes is left on
// the machine: no state directory, no process of a node or of a Mountpoint, no mount, and none of the FUSE
// connections the test's mounts had.
func checkTeardown(t *testing.T, ctx context.Context, st *s3install.Stack, fuseConns []string) {
	t.Helper()
	c := st.Cluster
	for _, n := range c.Nodes {
		if left := fuseMounts(t, n); len(left) > 0 {
			t.Errorf("FUSE mounts left on %s after helm uninstall: %v", n.Name, left)
		}
	}
	var states []string
	for _, n := range c.Nodes {
		states = append(states, n.StateDir())
	}
	if err := st.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	host, err := readMountinfo("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, state := range states {
		if _, err := os.Stat(state); !os.IsNotExist(err) {
			t.Errorf("node state %s is left (stat: %v)", state, err)
		}
		procs, err := rig.ProcessesWith(state)
		if err != nil {
			t.Fatal(err)
		}
		if len(procs) > 0 {
			t.Errorf("processes of a stopped node are left: %v", procs)
		}
		for _, m := range host {
			if strings.HasPrefix(m.target, state) {
				t.Errorf("mount of a stopped node is left: %s", m.target)
			}
		}
	}
	procs, err := rig.ProcessesWith(bucket)
	if err != nil {
		t.Fatal(err)
	}
	if len(procs) > 0 {
		t.Errorf("Mountpoint processes of bucket %s are left: %v", bucket, procs)
	}
	for _, conn := range fuseConns {
		if _, err := os.Stat(filepath.Join("/sys/fs/fuse/connections", conn)); !os.IsNotExist(err) {
			t.Errorf("FUSE connection %s of the test's mounts is left (stat: %v)", conn, err)
		}
	}
}
