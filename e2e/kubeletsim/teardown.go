package kubeletsim

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/container-storage-interface/spec/lib/go/csi"
)

// tearDownPod kills the Pod's containers if they still run, unpublishes every volume of a Pod, unstages those no other Pod on the node uses, drops them
// from volumesInUse and removes the Pod's directory.
func (n *Node) tearDownPod(ctx context.Context, key string) error {
	n.killContainers(key, n.cfg.MaxGracePeriod)
	ps := n.state.pod(key)
	if ps == nil {
		return nil
	}
	for _, pv := range n.state.snapshot(ps) {
		if err := n.tearDown(ctx, ps, pv); err != nil {
			return err
		}
		n.state.update(func() { delete(ps.volumes, pv.vol.podVolume) })
	}
	n.state.forget(key)
	if err := n.reportInUse(ctx); err != nil {
		return err
	}
	if err := n.tearDownEmptyDirs(ps.uid); err != nil {
		return err
	}
	podDir := n.paths.podDir(ps.uid)
	if mounted, err := MountsUnder(podDir); err != nil || len(mounted) > 0 {
		return fmt.Errorf("pod directory %s still has mounts %v (%v)", podDir, mounted, err)
	}
	if err := os.RemoveAll(podDir); err != nil {
		return fmt.Errorf("remove %s: %w", podDir, err)
	}
	n.log.V(2).Info("Pod volumes torn down", "pod", key)
	return nil
}

func (n *Node) tearDown(ctx context.Context, ps *podState, pv *podVolume) error {
	v := pv.vol
	lock := n.state.volumeLock(v.unique)
	lock.Lock()
	defer lock.Unlock()
	if pv.published {
		if v.block {
			if err := removeIfExists(n.paths.podDevicePath(ps.uid, v.specName)); err != nil {
				return err
			}
		}
		callCtx, cancel := context.WithTimeout(ctx, csiTimeout)
		_, err := n.node.NodeUnpublishVolume(callCtx, &csi.NodeUnpublishVolumeRequest{VolumeId: v.handle, TargetPath: pv.target})
		cancel()
		if err != nil {
			return fmt.Errorf("NodeUnpublishVolume %s at %s: %w", v.handle, pv.target, err)
		}
		// The kubelet removes the volume's directory (the parent of mount/) once the plugin is done with it.
		if err := removeIfExists(pv.target); err != nil {
			return err
		}
		if !v.block {
			if err := removeIfExists(filepath.Dir(pv.target)); err != nil {
				return err
			}
		}
		n.state.update(func() { pv.published = false })
		n.log.V(2).Info("Volume unpublished", "volume", v.handle, "target", pv.target)
	}
	if !pv.stagedFor {
		return nil
	}
	var last bool
	var staged *stagedVolume
	n.state.update(func() {
		staged = n.state.staged[v.unique]
		delete(staged.users, ps.uid)
		last = len(staged.users) == 0
	})
	pv.stagedFor = false
	if !last {
		return nil
	}
	if err := n.unstage(ctx, staged); err != nil {
		// Keep the Pod as a user so a retry unstages again.
		n.state.update(func() {
			staged.users[ps.uid] = true
			pv.stagedFor = true
		})
		return err
	}
	return nil
}

func (n *Node) unstage(ctx context.Context, s *stagedVolume) error {
	callCtx, cancel := context.WithTimeout(ctx, csiTimeout)
	defer cancel()
	if _, err := n.node.NodeUnstageVolume(callCtx, &csi.NodeUnstageVolumeRequest{VolumeId: s.vol.handle, StagingTargetPath: s.path}); err != nil {
		return fmt.Errorf("NodeUnstageVolume %s at %s: %w", s.vol.handle, s.path, err)
	}
	if err := removeIfExists(s.path); err != nil {
		return err
	}
	if !s.vol.block {
		// <driver>/<sha256(handle)>/ held only the global mount.
		if err := removeIfExists(filepath.Dir(s.path)); err != nil {
			return err
		}
	}
	n.state.update(func() { delete(n.state.staged, s.vol.unique) })
	n.log.V(2).Info("Volume unstaged", "volume", s.vol.handle, "path", s.path)
	return nil
}

// removeIfExists removes a file, symlink or empty directory; it never removes anything that is mounted or
// has content, so a failed unmount can never lead to deleting a volume's data.
func removeIfExists(path string) error {
	err := os.Remove(path)
	if err == nil || errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return fmt.Errorf("remove %s: %w", path, err)
}
