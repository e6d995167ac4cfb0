//go:build e2e

package ebsdriver

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stowage-csi/stowage/e2e/ec2sim"
)

// TestE2EEBSDeviceSerial: when the devicePath of the publish context is another attached volume's device (as
// on a Xen instance whose device name was reused after a detach), NodeStageVolume and raw block
// NodePublishVolume refuse it with FailedPrecondition and mount nothing, so the Pod never writes onto the
// other volume; with its own device the volume is staged and published. Loop devices have no serial, so the
// plugin's lsblk answers SERIAL for the two loop devices as a Nitro NVMe controller would (vol + hex ID) and
// runs the real lsblk for anything else; device lookup, mounts and the loop devices are real.
func TestE2EEBSDeviceSerial(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("needs root for loop devices and mounts")
	}
	const instanceID = "i-05e7a10000000000b"
	sim, linkDir := startSim(t, 0.01, []ec2sim.Instance{{ID: instanceID, Zone: testZone, Type: "m5.large", Local: true}})
	shimDir, serials := lsblkShim(t)
	env := pluginEnv(t, sim, instanceID, true)
	for i, e := range env {
		if p, ok := strings.CutPrefix(e, "PATH="); ok {
			env[i] = "PATH=" + shimDir + ":" + p
		}
	}
	p := startPlugin(t, buildPlugin(t), env, "all", "--device-link-dir="+linkDir, "--metadata-sources=imds")
	d := newDriver(t, sim, p, instanceID)
	ctx := testContext(t, 2*time.Minute)

	fsCap, blockCap := mountCapability("ext4"), blockCapability()
	fsVol := d.createVolume(ctx, volumeRequest("serial-fs", 1, fsCap, nil))
	blockVol := d.createVolume(ctx, volumeRequest("serial-block", 1, blockCap, nil))
	fsCtx, blockCtx := d.attach(ctx, fsVol, fsCap), d.attach(ctx, blockVol, blockCap)
	fsDev, blockDev := d.loopDevice(fsVol), d.loopDevice(blockVol)
	if fsDev == "" || blockDev == "" {
		t.Fatalf("loop devices %q %q", fsDev, blockDev)
	}
	var lines []string
	for vol, dev := range map[string]string{fsVol: fsDev, blockVol: blockDev} {
		lines = append(lines, dev+" "+strings.ReplaceAll(vol, "-", ""))
	}
	if err := os.WriteFile(serials, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	staging := filepath.Join(d.work, "staging")
	target := filepath.Join(d.work, "pod", "dev", "block")
	t.Cleanup(func() {
		_ = unix.Unmount(target, unix.MNT_DETACH)
		_ = unix.Unmount(staging, unix.MNT_DETACH)
	})

	// Each volume handed the other's device.
	_, err := d.node.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: fsVol, StagingTargetPath: staging, VolumeCapability: fsCap,
		PublishContext: map[string]string{"devicePath": blockDev}})
	wantRefused(t, err, "NodeStageVolume", fsVol, staging)
	_, err = d.node.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: blockVol, TargetPath: target, VolumeCapability: blockCap,
		PublishContext: map[string]string{"devicePath": fsDev}})
	wantRefused(t, err, "NodePublishVolume", blockVol, target)
	if _, err := os.Stat(target); !os.IsNotExist(err) {
		t.Fatalf("raw block target created for a refused device: %v", err)
	}

	// Their own devices.
	if _, err := d.node.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: fsVol, StagingTargetPath: staging, VolumeCapability: fsCap,
		PublishContext: fsCtx}); err != nil {
		t.Fatalf("NodeStageVolume with its own device: %v", err)
	}
	if _, err := d.node.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: blockVol, TargetPath: target, VolumeCapability: blockCap,
		PublishContext: blockCtx}); err != nil {
		t.Fatalf("NodePublishVolume with its own device: %v", err)
	}
	if !mountedFrom(t, target, blockDev) {
		t.Fatalf("%s is not a bind of %s", target, blockDev)
	}
	if _, err := d.node.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: blockVol, TargetPath: target}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.node.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: fsVol, StagingTargetPath: staging}); err != nil {
		t.Fatal(err)
	}
	d.detach(ctx, fsVol)
	d.detach(ctx, blockVol)
	d.deleteVolume(ctx, fsVol)
	d.deleteVolume(ctx, blockVol)
}

// lsblkShim writes an lsblk that answers "--output SERIAL" for the devices listed in the returned file (lines
// "device serial") and runs the real lsblk for everything else; it returns its directory and the file.
func lsblkShim(t *testing.T) (string, string) {
	t.Helper()
	real, err := exec.LookPath("lsblk")
	if err != nil {
		t.Fatalf("lsblk: %v", err)
	}
	dir := t.TempDir()
	serials := filepath.Join(dir, "serials")
	if err := os.WriteFile(serials, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	script := fmt.Sprintf(`#!/bin/sh
case " $* " in *" SERIAL "*) ;; *) exec %[1]s "$@" ;; esac
for dev; do :; done
serial=$(awk -v d="$dev" '$1 == d { print $2 }' %[2]s)
[ -n "$serial" ] || exec %[1]s "$@"
echo "$serial"
`, real, serials)
	if err := os.WriteFile(filepath.Join(dir, "lsblk"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir, serials
}

// wantRefused checks that a node call given another volume's device failed with FailedPrecondition naming
// the volume and left nothing mounted at path.
func wantRefused(t *testing.T, err error, call, volID, path string) {
	t.Helper()
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "serial") {
		t.Fatalf("%s of %s on another volume's device: %v, want FailedPrecondition naming the serial", call, volID, err)
	}
	if mountedFrom(t, path, "") {
		t.Fatalf("%s of %s mounted %s", call, volID, path)
	}
}

// mountedFrom reports whether path is a mount point, and when source is not "", a bind of that device node
// (the same device number).
func mountedFrom(t *testing.T, path, source string) bool {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	mounted := false
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && f[4] == path {
			mounted = true
		}
	}
	if !mounted || source == "" {
		return mounted
	}
	var st, want unix.Stat_t
	if unix.Stat(path, &st) != nil || unix.Stat(source, &want) != nil {
		return false
	}
	return st.Mode&unix.S_IFMT == unix.S_IFBLK && st.Rdev == want.Rdev
}
