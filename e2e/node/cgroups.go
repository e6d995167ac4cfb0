package node

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// cgroupMount is where the cgroup v1 hierarchies are mounted on these machines (cgroup v1 hybrid).
const cgroupMount = "/sys/fs/cgroup"

// cgroupRoot is the kubelet's --cgroup-root for one node: a path created in every cgroup hierarchy (the
// kubelet wants it to exist in each v1 one), under the memory cgroup this process runs in, so the node's Pods are
// counted against the same memory limit as the test that started them.
type cgroupRoot struct {
	path    string   // as the kubelet sees it, e.g. /process_api/x/stowage-node-a-1234
	created []string // directories this node created, deepest last
}

// newCgroupRoot creates name under this process's memory cgroup in every hierarchy. cpuset needs its
// cpus and mems copied down from the parent before a task may join.
func newCgroupRoot(name string) (_ *cgroupRoot, err error) {
	parent, err := ownMemoryCgroup()
	if err != nil {
		return nil, err
	}
	root := &cgroupRoot{path: filepath.Join(parent, name)}
	defer func() {
		if err != nil {
			err = errors.Join(err, root.remove())
		}
	}()
	hierarchies, err := os.ReadDir(cgroupMount)
	if err != nil {
		return nil, fmt.Errorf("list cgroup hierarchies: %w", err)
	}
	for _, h := range hierarchies {
		// The unified (v2) hierarchy of a hybrid setup too: runc creates each container's cgroup there as well,
		// so the path is created (and removed) there like in the v1 hierarchies.
		if !h.IsDir() {
			continue
		}
		if err := root.mkdirAll(filepath.Join(cgroupMount, h.Name()), h.Name() == "cpuset"); err != nil {
			return nil, err
		}
	}
	return root, nil
}

// mkdirAll creates every missing directory of root.path under hierarchy, recording each.
func (r *cgroupRoot) mkdirAll(hierarchy string, cpuset bool) error {
	dir := hierarchy
	for _, part := range strings.Split(strings.Trim(r.path, "/"), "/") {
		parent := dir
		dir = filepath.Join(dir, part)
		if _, err := os.Stat(dir); err == nil {
			continue
		}
		// The nodes of a cluster start at once and share the path's upper directories: the one that loses the
		// race to create one finds it there, and leaves its removal to the one that made it.
		if err := os.Mkdir(dir, 0o755); errors.Is(err, fs.ErrExist) {
			continue
		} else if err != nil {
			return fmt.Errorf("create cgroup %s: %w", dir, err)
		}
		r.created = append(r.created, dir)
		if cpuset {
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				v, err := os.ReadFile(filepath.Join(parent, f))
				if err != nil {
					return fmt.Errorf("read %s: %w", f, err)
				}
				if err := os.WriteFile(filepath.Join(dir, f), v, 0o644); err != nil {
					return fmt.Errorf("write %s of %s: %w", f, dir, err)
				}
			}
		}
	}
	return nil
}

// remove deletes every cgroup below the root (the kubelet's kubepods tree and the containers' cgroups) and
// the directories newCgroupRoot created. A cgroup can be removed once its tasks are gone; after the node's
// PID namespace ended that takes at most a moment, so removal is retried briefly.
func (r *cgroupRoot) remove() error {
	var errs []error
	for i := len(r.created) - 1; i >= 0; i-- {
		if err := removeCgroupTree(r.created[i]); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func removeCgroupTree(top string) error {
	var dirs []string
	err := filepath.WalkDir(top, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("walk cgroup %s: %w", top, err)
	}
	// Deepest first.
	sort.Slice(dirs, func(i, j int) bool { return strings.Count(dirs[i], "/") > strings.Count(dirs[j], "/") })
	for _, d := range dirs {
		var err error
		for attempt := 0; attempt < 50; attempt++ {
			if err = os.Remove(d); err == nil || errors.Is(err, fs.ErrNotExist) {
				err = nil
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err != nil {
			return fmt.Errorf("remove cgroup %s: %w", d, err)
		}
	}
	return nil
}

// ownMemoryCgroup is this process's cgroup in the memory hierarchy.
func ownMemoryCgroup() (string, error) {
	f, err := os.Open("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		// hierarchy-ID:controller-list:path
		parts := strings.SplitN(s.Text(), ":", 3)
		if len(parts) == 3 && parts[1] == "memory" {
			return parts[2], nil
		}
	}
	if err := s.Err(); err != nil {
		return "", err
	}
	return "", errors.New("no memory cgroup in /proc/self/cgroup: the rig's nodes need cgroup v1")
}
