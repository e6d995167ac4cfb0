package ebsstack

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"

	"github.com/stowage-csi/stowage/e2e/ec2sim"
)

// FilesystemsAndBlock is scenario 3: an xfs volume and a raw block volume on node C (another zone).
func (l *Lifecycle) FilesystemsAndBlock(ctx context.Context) error {
	l.R.Scenario("3. xfs and a raw block volume")
	return l.steps(ctx, step{"xfs volume mounted on node C", l.xfsOnC}, step{"raw block volume on node C", l.blockOnC})
}

// xfsOnC provisions an xfs volume for a Pod on node C and writes and reads a file through it.
func (l *Lifecycle) xfsOnC(ctx context.Context) (string, error) {
	zone := l.zone(l.NodeC)
	pv, vol, pod, err := l.createAndStart(ctx, filesystemClass("stowage-xfs", "xfs"),
		Claim("xfs-0", "stowage-xfs", "1Gi", l.NodeC, false), Pod("xfs-user", l.NodeC, "xfs-0", false),
		func(vol ec2sim.VolumeState) error {
			if vol.Zone != zone {
				return fmt.Errorf("xfs volume %s is in %s, node %s in %s", vol.ID, vol.Zone, l.NodeC, zone)
			}
			return nil
		})
	if err != nil {
		return "", err
	}
	node := l.node(l.NodeC)
	if err := checkFSType(node, "staging path of "+vol.ID, node.StagingPath(vol.ID), "xfs"); err != nil {
		return "", err
	}
	path := filepath.Join(node.PublishPath(string(pod.UID), pv.Name), "hello.txt")
	want := []byte("hello from xfs\n")
	if err := writeSynced(path, want); err != nil {
		return "", err
	}
	if got, err := os.ReadFile(path); err != nil || !bytes.Equal(got, want) {
		return "", fmt.Errorf("read back %q, %v", got, err)
	}
	return fmt.Sprintf("PVC xfs-0 (EBS %s in %s) formatted xfs, mounted in xfs-user on %s, file written and read back", vol.ID, vol.Zone, l.NodeC), nil
}

// blockOnC provisions a raw block volume for a Pod on node C and writes through the Pod's device; the bytes
// must reach the EBS volume itself (the emulator's backing file).
func (l *Lifecycle) blockOnC(ctx context.Context) (string, error) {
	pv, vol, pod, err := l.createAndStart(ctx, nil,
		Claim("block-0", "stowage-ext4", "1Gi", l.NodeC, true), Pod("block-user", l.NodeC, "block-0", true), nil)
	if err != nil {
		return "", err
	}
	dev := l.node(l.NodeC).DevicePath(string(pod.UID), pv.Name)
	data := make([]byte, 64<<10)
	_, _ = rand.Read(data)
	const offset = 1 << 20
	if err := writeAt(dev, data, offset); err != nil {
		return "", err
	}
	if err := holds(dev, data, offset, "read back through "+dev+" differs from what was written"); err != nil {
		return "", err
	}
	if err := holds(vol.File, data, offset, "the volume file "+vol.File+" does not hold the bytes written through "+dev); err != nil {
		return "", err
	}
	return fmt.Sprintf("PVC block-0 (EBS %s) as a raw device in block-user: 64 KiB written at 1 MiB and read back", vol.ID), nil
}
