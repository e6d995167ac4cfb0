//go:build linux

package ec2sim

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"
)

// LinkName is the by-id name Nitro instances give an EBS volume's NVMe device.
func LinkName(volumeID string) string {
	return "nvme-Amazon_Elastic_Block_Store_" + strings.ReplaceAll(volumeID, "-", "")
}

// loopDev is one volume's loop device; several local instances of a multi-attach volume share it.
// The device is bound with autoclear and fd is held open while it is attached: when this process dies, the
// kernel closes fd and detaches the device once nothing else (a mount) uses it, so nothing leaks.
type loopDev struct {
	fd        int
	dev       string
	link      string
	instances map[string]bool
}

// loopManager owns the loop devices and by-id links of volumes attached to local instances. Its methods are
// called with the server's lock held.
type loopManager struct {
	log     klog.Logger
	linkDir string
	volDir  string
	devs    map[string]*loopDev
	// failed remembers recent attach failures, so the ticker retries once a second instead of every tick.
	failed map[string]failure
}

type failure struct {
	at  time.Time
	err error
}

const retryFailedAttach = time.Second

func newLoopManager(log klog.Logger, linkDir, volDir string) *loopManager {
	return &loopManager{log: log, linkDir: linkDir, volDir: volDir, devs: map[string]*loopDev{}, failed: map[string]failure{}}
}

// ensure makes sure the volume has a loop device and link for the instance.
func (m *loopManager) ensure(volID, instID, file string) error {
	if d, ok := m.devs[volID]; ok {
		d.instances[instID] = true
		return nil
	}
	if f, ok := m.failed[volID]; ok && time.Since(f.at) < retryFailedAttach {
		return f.err
	}
	dev, fd, err := m.attachWithLink(volID, file)
	if err != nil {
		m.failed[volID] = failure{at: time.Now(), err: err}
		return err
	}
	delete(m.failed, volID)
	m.devs[volID] = &loopDev{fd: fd, dev: dev, link: filepath.Join(m.linkDir, LinkName(volID)), instances: map[string]bool{instID: true}}
	m.log.V(2).Info("Attached loop device", "volume", volID, "device", dev)
	return nil
}

// attachWithLink binds a loop device to the volume's file and points the by-id link at it.
func (m *loopManager) attachWithLink(volID, file string) (string, int, error) {
	dev, fd, err := attachLoop(file)
	if err != nil {
		return "", -1, err
	}
	link := filepath.Join(m.linkDir, LinkName(volID))
	if err := os.MkdirAll(m.linkDir, 0o755); err != nil {
		detachFD(fd)
		return "", -1, err
	}
	_ = os.Remove(link)
	if err := os.Symlink(dev, link); err != nil {
		detachFD(fd)
		return "", -1, fmt.Errorf("link %s: %w", link, err)
	}
	return dev, fd, nil
}

// release drops the instance's use of the volume's device, taking device and link down with the last one.
func (m *loopManager) release(volID, instID string) error {
	d, ok := m.devs[volID]
	if !ok {
		return nil
	}
	delete(d.instances, instID)
	if len(d.instances) > 0 {
		return nil
	}
	return m.teardown(volID, d)
}

func (m *loopManager) teardown(volID string, d *loopDev) error {
	if target, err := os.Readlink(d.link); err == nil && target == d.dev {
		_ = os.Remove(d.link)
	}
	detachFD(d.fd)
	delete(m.devs, volID)
	m.log.V(2).Info("Detached loop device", "volume", volID, "device", d.dev)
	return nil
}

// grow tells the volume's loop device, if any, that its file grew.
func (m *loopManager) grow(volID string) error {
	d, ok := m.devs[volID]
	if !ok {
		return nil
	}
	if err := unix.IoctlSetInt(d.fd, unix.LOOP_SET_CAPACITY, 0); err != nil {
		return fmt.Errorf("LOOP_SET_CAPACITY %s: %w", d.dev, err)
	}
	return nil
}

// device returns the loop device and link of a volume, if it has them.
func (m *loopManager) device(volID string) (dev, link string) {
	if d, ok := m.devs[volID]; ok {
		return d.dev, d.link
	}
	return "", ""
}

func (m *loopManager) releaseAll() error {
	var errs []error
	for volID, d := range m.devs {
		if err := m.teardown(volID, d); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// releaseStale detaches loop devices backed by this data dir's volume files that no live server owns: what a
// killed predecessor left behind. Links in the link dir pointing at them go too.
func (m *loopManager) releaseStale() {
	entries, err := filepath.Glob("/sys/block/loop*/loop/backing_file")
	if err != nil {
		return
	}
	for _, e := range entries {
		b, err := os.ReadFile(e)
		if err != nil {
			continue
		}
		backing := strings.TrimSuffix(strings.TrimSpace(string(b)), " (deleted)")
		if filepath.Dir(backing) != m.volDir {
			continue
		}
		dev := "/dev/" + filepath.Base(filepath.Dir(filepath.Dir(e)))
		links, _ := os.ReadDir(m.linkDir)
		for _, l := range links {
			p := filepath.Join(m.linkDir, l.Name())
			if t, err := os.Readlink(p); err == nil && t == dev {
				_ = os.Remove(p)
			}
		}
		if err := detachLoop(dev); err != nil {
			m.log.Error(err, "Detaching stale loop device", "device", dev, "file", backing)
		} else {
			m.log.Info("Detached stale loop device", "device", dev, "file", backing)
		}
	}
}

// attachLoop binds a free loop device to file with autoclear, and returns its path and an open fd that keeps
// it bound.
func attachLoop(file string) (string, int, error) {
	ctl, err := unix.Open("/dev/loop-control", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", -1, fmt.Errorf("open /dev/loop-control: %w", err)
	}
	defer unix.Close(ctl)
	back, err := unix.Open(file, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", -1, fmt.Errorf("open %s: %w", file, err)
	}
	defer unix.Close(back)
	// Another process may grab the free device between GET_FREE and CONFIGURE; then try the next one.
	for attempt := 0; attempt < 20; attempt++ {
		n, err := unix.IoctlRetInt(ctl, unix.LOOP_CTL_GET_FREE)
		if err != nil {
			return "", -1, fmt.Errorf("LOOP_CTL_GET_FREE: %w", err)
		}
		dev := "/dev/loop" + strconv.Itoa(n)
		if _, err := os.Stat(dev); errors.Is(err, fs.ErrNotExist) {
			// Containers often have no device nodes for new loop devices.
			if err := unix.Mknod(dev, unix.S_IFBLK|0o660, int(unix.Mkdev(7, uint32(n)))); err != nil && !errors.Is(err, fs.ErrExist) {
				return "", -1, fmt.Errorf("mknod %s: %w", dev, err)
			}
		}
		fd, err := unix.Open(dev, unix.O_RDWR|unix.O_CLOEXEC, 0)
		if err != nil {
			return "", -1, fmt.Errorf("open %s: %w", dev, err)
		}
		err = configureLoop(fd, back, file)
		if err == nil {
			return dev, fd, nil
		}
		unix.Close(fd)
		if !errors.Is(err, unix.EBUSY) {
			return "", -1, fmt.Errorf("configure %s for %s: %w", dev, file, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return "", -1, fmt.Errorf("no free loop device for %s", file)
}

func configureLoop(fd, back int, file string) error {
	info := unix.LoopInfo64{Flags: unix.LO_FLAGS_AUTOCLEAR}
	copy(info.File_name[:len(info.File_name)-1], file)
	cfg := unix.LoopConfig{Fd: uint32(back), Info: info}
	err := unix.IoctlLoopConfigure(fd, &cfg)
	if !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOTTY) {
		return err
	}
	// Kernels before 5.8 have no LOOP_CONFIGURE.
	if err := unix.IoctlSetInt(fd, unix.LOOP_SET_FD, back); err != nil {
		return err
	}
	if err := unix.IoctlLoopSetStatus64(fd, &info); err != nil {
		_ = unix.IoctlSetInt(fd, unix.LOOP_CLR_FD, 0)
		return err
	}
	return nil
}

// detachFD writes the device's cached writes to the volume's file, unbinds the loop device behind fd and
// closes it. Had the unbind failed, the close still detaches it by autoclear.
//
// The flush first: a node writes a raw block device through the kernel's page cache (a Pod's dd), and on a
// real node its last close of the device writes those pages back before the volume is detached. Here fd
// keeps the device open, so that last close never comes, and LOOP_CLR_FD drops the pages still dirty: the
// volume would lose writes EC2 keeps.
func detachFD(fd int) {
	_ = unix.Fsync(fd)
	_ = unix.IoctlSetInt(fd, unix.LOOP_CLR_FD, 0)
	_ = unix.Close(fd)
}

// detachLoop unbinds a loop device. A device still open elsewhere (mounted) is detached by the kernel when
// its last user goes away.
func detachLoop(dev string) error {
	fd, err := unix.Open(dev, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open %s: %w", dev, err)
	}
	defer unix.Close(fd)
	if err := unix.IoctlSetInt(fd, unix.LOOP_CLR_FD, 0); err != nil && !errors.Is(err, unix.ENXIO) {
		return fmt.Errorf("LOOP_CLR_FD %s: %w", dev, err)
	}
	return nil
}
