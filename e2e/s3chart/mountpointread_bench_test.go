//go:build bench

package s3chart_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/stowage-csi/stowage/e2e/node"
	"github.com/stowage-csi/stowage/e2e/rig"
	"github.com/stowage-csi/stowage/e2e/s3install"
	"github.com/stowage-csi/stowage/e2e/s3server"
	"github.com/stowage-csi/stowage/shared/s3api"
)

const (
	readSize   = 1 << 30
	readObject = "big.bin"
	readRounds = 3
)

// timedLine is what the reading Pod prints: /proc/uptime's seconds before and after its read.
var timedLine = regexp.MustCompile(`timed ([0-9.]+) ([0-9.]+)`)

// TestBenchS3ChartMountpointRead reads a 1 GiB object sequentially (1 MiB reads, dd) from a Pod on a real node
// through the Mountpoint Pod stowage-s3's chart runs, and the same object through s3-fuse mounted directly on
// the machine against the same versitygw, in alternating rounds, and prints MiB/s side by side: what the Pod,
// the FUSE descriptor handed over by the node plugin and the container's limits cost a user. Each Pod read is a
// new Mountpoint Pod (the last one's is gone first), so no page cache serves it. Nothing is asserted about
// timing; the bytes the Pod read are checked against the object.
func TestBenchS3ChartMountpointRead(t *testing.T) {
	ctx := context.Background()
	specs := []node.Spec{{Name: "node-a", Zone: "zone-a", Taints: []string{s3api.TaintAgentNotReady + "=true:NoExecute"}}}
	in := s3install.ForTest(t, s3install.Options{Nodes: specs})
	if err := in.S3.CreateBucket(ctx, bucket); err != nil {
		t.Fatal(err)
	}
	data := make([]byte, readSize)
	rand.New(rand.NewSource(1024)).Read(data)
	if err := in.S3.WriteFixture(bucket, readObject, data); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	want := hex.EncodeToString(sum[:])
	createVolume(t, ctx, in.Client, in.S3.Endpoint, volume, nil)
	fuse := buildS3Fuse(t, ctx)

	var pod, direct []float64
	for round := 0; round < readRounds; round++ {
		t.Run(fmt.Sprintf("direct/round-%d", round), func(t *testing.T) {
			direct = append(direct, readDirect(t, ctx, fuse, in.S3))
		})
		t.Run(fmt.Sprintf("pod/round-%d", round), func(t *testing.T) {
			pod = append(pod, readInPod(t, ctx, in.Client, in.Dynamic, in.Cluster.Nodes[0].Name, round, want))
		})
	}
	med := func(xs []float64) float64 {
		if len(xs) == 0 {
			return 0
		}
		s := append([]float64(nil), xs...)
		sort.Float64s(s)
		return s[len(s)/2]
	}
	fmt.Printf("\nstowage-s3 on a real node: a %d MiB object read sequentially in 1 MiB reads, versitygw on the Pod network's gateway,\n", readSize>>20)
	fmt.Printf("median of %d rounds (per round in brackets)\n", readRounds)
	fmt.Printf("  %-52s %6.0f MiB/s %v\n", "s3-fuse mounted directly on the machine", med(direct), rounded(direct))
	fmt.Printf("  %-52s %6.0f MiB/s %v\n", "a Pod reading through the chart's Mountpoint Pod", med(pod), rounded(pod))
	if d := med(direct); d > 0 {
		fmt.Printf("  the Pod reads at %.2fx the direct mount\n\n", med(pod)/d)
	}
}

func rounded(xs []float64) []int {
	out := make([]int, len(xs))
	for i, x := range xs {
		out[i] = int(x + 0.5)
	}
	return out
}

// readInPod runs a busybox Pod that reads the object with dd between two readings of /proc/uptime, then hashes
// it, and returns MiB/s; it deletes the Pod and waits for its Mountpoint Pod's attachment to go.
func readInPod(t *testing.T, ctx context.Context, client kubernetes.Interface, dyn dynamic.Interface, nodeName string, round int, want string) float64 {
	name := fmt.Sprintf("read-big-%d", round)
	script := `s=$(cat /proc/uptime); dd if=/data/` + readObject + ` of=/dev/null bs=1M 2>/dev/null; e=$(cat /proc/uptime); ` +
		`echo "timed ${s%% *} ${e%% *}"; sha256sum /data/` + readObject + `; echo read-done; exec sleep 3600`
	workload(t, ctx, client, name, nodeName, volume, script)
	waitLog(t, ctx, client, name, "read-done")
	logs, err := client.CoreV1().Pods(workNS).GetLogs(name, &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(logs, []byte(want)) {
		t.Errorf("Pod %s read other bytes than the object (sha256 %s): %s", name, want, logs)
	}
	m := timedLine.FindSubmatch(logs)
	if m == nil {
		t.Fatalf("Pod %s printed no timing: %s", name, logs)
	}
	start, _ := strconv.ParseFloat(string(m[1]), 64)
	end, _ := strconv.ParseFloat(string(m[2]), 64)
	deletePods(t, ctx, client, name)
	// The next round's read must start a new Mountpoint Pod, with no page cache of this one's mount.
	rig.Eventually(t, ctx, 3*time.Minute, "the Mountpoint Pod attachments to go", func(ctx context.Context) (bool, error) {
		l, err := dyn.Resource(s3api.GroupVersionResource()).List(ctx, metav1.ListOptions{})
		return err == nil && len(l.Items) == 0, err
	})
	if end <= start {
		t.Fatalf("Pod %s: read ended at uptime %.2f, not after its start %.2f", name, end, start)
	}
	return float64(readSize) / (1 << 20) / (end - start)
}

// buildS3Fuse builds the s3-fuse command the s3-mounter image runs.
func buildS3Fuse(t *testing.T, ctx context.Context) string {
	root, err := rig.RepoRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	bin, err := rig.BuildCommand(ctx, root, "s3-mounter", "s3-fuse", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// readDirect mounts the bucket with s3-fuse on the machine, at the same endpoint the Mountpoint Pods use, reads
// the object in 1 MiB reads and returns MiB/s; cleanup unmounts.
func readDirect(t *testing.T, ctx context.Context, fuse string, srv *s3server.Server) float64 {
	dir, logs := t.TempDir(), t.TempDir()
	p, err := rig.Start(rig.Spec{Name: "s3-fuse", Path: fuse, LogDir: logs, Env: srv.Env(),
		Args: []string{bucket, dir, "--foreground", "--endpoint-url", srv.Endpoint, "--force-path-style", "--region", s3server.Region}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			_ = syscall.Unmount(dir, syscall.MNT_DETACH)
		}
		p.Stop(30 * time.Second)
	})
	rig.Eventually(t, ctx, time.Minute, "s3-fuse to serve "+dir, func(context.Context) (bool, error) {
		if exited, err := p.Exited(); exited {
			return false, fmt.Errorf("s3-fuse exited (%v): %s", err, p.Tail(20))
		}
		return strings.Contains(rig.TailFile(p.LogPath, 50), `"serving"`), nil
	})
	f, err := os.Open(filepath.Join(dir, readObject))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	start := time.Now()
	n, err := io.CopyBuffer(io.Discard, f, make([]byte, 1<<20))
	el := time.Since(start)
	if err != nil || n != readSize {
		t.Fatalf("read %s through s3-fuse: %d bytes, %v", readObject, n, err)
	}
	return float64(n) / (1 << 20) / el.Seconds()
}
