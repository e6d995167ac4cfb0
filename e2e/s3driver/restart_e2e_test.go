//go:build e2e

package s3driver

import (
	"context"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/stowage-csi/stowage/e2e/kubeletsim"
	"github.com/stowage-csi/stowage/e2e/rig"
	"github.com/stowage-csi/stowage/e2e/s3stack"
	"github.com/stowage-csi/stowage/shared/s3api"
)

// kill9 sends SIGKILL to one of the stack's processes and waits until it is gone.
func kill9(t *testing.T, ctx context.Context, s *s3stack.Stack, name string) {
	t.Helper()
	p := s.Process(name)
	p.Signal(syscall.SIGKILL)
	select {
	case <-p.Done():
	case <-ctx.Done():
		t.Fatalf("%s did not end after SIGKILL", name)
	}
}

// TestE2ES3DriverRestarts kills s3-node and s3-controller with SIGKILL half-way through their work and
// restarts them: every workload then mounts and reads and writes through its mount, each sharing group has
// exactly one Mountpoint Pod, and deleting the workloads leaves no Mountpoint Pod, attachment or mount.
func TestE2ES3DriverRestarts(t *testing.T) {
	ctx, s := startStack(t, s3stack.Options{})
	nodeA, nodeB := s.NodeOrder[0], s.NodeOrder[1]

	t.Run("s3-node killed mid-publish", func(t *testing.T) {
		mps := watchMountpointPods(t, s)
		if err := s.CreateVolume(ctx, s3stack.Volume{Name: "node-kill", Bucket: "bucket-node-kill", MountOptions: []string{"allow-delete"}}); err != nil {
			t.Fatal(err)
		}
		// Mountpoint reaches S3 through a gate that holds its first request (the ListObjectsV2 check, before it
		// serves the mount): s3-node, which has mounted /dev/fuse and handed the fd over, then waits for Mountpoint.
		g := startGate(t, s.S3.Endpoint)
		setEndpoint(t, ctx, s, "node-kill", g.URL())
		cleanupWorkloads(t, s, "nk-1", "nk-2")
		first, err := s.CreateWorkload(ctx, s3stack.Workload{Name: "nk-1", Node: nodeA, Claim: "node-kill"})
		if err != nil {
			t.Fatal(err)
		}
		select {
		case <-g.arrived:
		case <-time.After(s3stack.StepTimeout):
			t.Fatalf("Mountpoint never reached S3\n%s", events(ctx, s, "nk-1"))
		}
		root := s.Nodes[nodeA].Kubelet.RootDir()
		sources, _ := kubeletsim.MountsUnder(filepath.Join(root, "plugins", s3api.DriverName, "mnt"))
		targets, _ := kubeletsim.MountsUnder(s.PublishPath(first))
		if len(sources) != 1 || len(targets) != 0 {
			t.Fatalf("mid-publish: source mounts %v and target mounts %v, want one source and no target", sources, targets)
		}
		kill9(t, ctx, s, s3stack.NodeProcess(nodeA))
		g.Open()
		if _, err := s.Restart(ctx, s3stack.NodeProcess(nodeA)); err != nil {
			t.Fatal(err)
		}

		a, err := s.WaitRunning(ctx, "nk-1")
		if err != nil {
			t.Fatalf("%v\n%s", err, events(ctx, s, "nk-1"))
		}
		b := run(t, ctx, s, s3stack.Workload{Name: "nk-2", Node: nodeA, Claim: "node-kill"})
		checkGroups(t, ctx, s, [][]*v1.Pod{{a, b}})
		writeRead(t, ctx, s, a, b, "after-node-kill.txt")
		writeRead(t, ctx, s, b, a, "back.txt")

		deleteWorkloads(t, ctx, s, "nk-1", "nk-2")
		checkNothingLeft(t, ctx, s)
		mps.checkEndedWithExit0(t)
	})

	t.Run("s3-controller killed while workloads are created", func(t *testing.T) {
		mps := watchMountpointPods(t, s)
		if err := s.CreateVolume(ctx, s3stack.Volume{Name: "controller-kill", Bucket: "bucket-controller-kill", MountOptions: []string{"allow-delete"}}); err != nil {
			t.Fatal(err)
		}
		names := []string{"ck-a1", "ck-a2", "ck-b1", "ck-b2"}
		nodes := map[string]string{"ck-a1": nodeA, "ck-a2": nodeA, "ck-b1": nodeB, "ck-b2": nodeB}
		cleanupWorkloads(t, s, names...)
		create := func(name string) {
			if _, err := s.CreateWorkload(ctx, s3stack.Workload{Name: name, Node: nodes[name], Claim: "controller-kill"}); err != nil {
				t.Fatal(err)
			}
		}
		// The controller writes a workload's attachment and then creates its Mountpoint Pod. It is frozen as
		// soon as the first attachment shows, maybe before that Pod exists, the other workloads are created
		// while it is frozen, and it is killed with all of them still to do.
		create(names[0])
		err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, s3stack.StepTimeout, true, func(ctx context.Context) (bool, error) {
			return len(attachments(t, ctx, s)) > 0, nil
		})
		if err != nil {
			t.Fatalf("no attachment for %s: %v", names[0], err)
		}
		s.Process(s3stack.ControllerName).Signal(syscall.SIGSTOP)
		pods, _ := s.MountpointPods(ctx)
		t.Logf("s3-controller frozen with %d Mountpoint Pod(s) created", len(pods))
		for _, n := range names[1:] {
			create(n)
		}
		kill9(t, ctx, s, s3stack.ControllerName)
		if _, err := s.Restart(ctx, s3stack.ControllerName); err != nil {
			t.Fatal(err)
		}

		w := map[string]*v1.Pod{}
		for _, n := range names {
			p, err := s.WaitRunning(ctx, n)
			if err != nil {
				t.Fatalf("%v\n%s", err, events(ctx, s, n))
			}
			w[n] = p
		}
		checkGroups(t, ctx, s, [][]*v1.Pod{{w["ck-a1"], w["ck-a2"]}, {w["ck-b1"], w["ck-b2"]}})
		writeRead(t, ctx, s, w["ck-a1"], w["ck-b2"], "a-to-b.txt")
		writeRead(t, ctx, s, w["ck-b1"], w["ck-a2"], "b-to-a.txt")

		deleteWorkloads(t, ctx, s, names...)
		checkNothingLeft(t, ctx, s)
		mps.checkEndedWithExit0(t)
	})
}

// checkGroups checks that each group of workloads shares one Mountpoint Pod, that groups do not share, and
// that no other Mountpoint Pod exists or is named in an attachment.
func checkGroups(t *testing.T, ctx context.Context, s *s3stack.Stack, groups [][]*v1.Pod) {
	t.Helper()
	seen := map[string]bool{}
	for _, g := range groups {
		mp := servingPod(t, ctx, s, g[0])
		for _, w := range g[1:] {
			if other := servingPod(t, ctx, s, w); other != mp {
				t.Errorf("workloads %s and %s are served by Mountpoint Pods %s and %s, want one", g[0].Name, w.Name, mp, other)
			}
		}
		if seen[mp] {
			t.Errorf("Mountpoint Pod %s serves two sharing groups", mp)
		}
		seen[mp] = true
	}
	// A Mountpoint Pod is created after its attachment names it, so wait for the named ones to exist; then
	// there must be no more of them than groups.
	rig.Eventually(t, ctx, s3stack.StepTimeout, "one Mountpoint Pod per sharing group", func(ctx context.Context) (bool, error) {
		pods, err := s.MountpointPods(ctx)
		if err != nil {
			return false, err
		}
		got := map[string]bool{}
		for _, p := range pods {
			got[p.Name] = true
		}
		for mp := range seen {
			if !got[mp] {
				return false, nil
			}
		}
		if len(pods) != len(seen) {
			t.Fatalf("%d Mountpoint Pods for %d sharing groups: %v", len(pods), len(seen), got)
		}
		return true, nil
	})
	if named := sharingGroups(t, ctx, s); len(named) != len(seen) {
		t.Errorf("attachments name Mountpoint Pods %v, want only %v", named, seen)
	}
}
