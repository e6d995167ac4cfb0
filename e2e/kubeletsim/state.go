package kubeletsim

import (
	"errors"
	"fmt"
	"sort"
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// errWaiting marks a Pod that cannot go further yet (claim not bound, volume not attached); it is retried
// without being logged as a failure.
var errWaiting = errors.New("waiting")

func waiting(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errWaiting, fmt.Sprintf(format, args...))
}

// state is what the node has done so far: the volumes of each Pod (desired and published) and the staged
// volumes with the Pods using them. It is the kubelet's actual state of the world, in memory only.
type state struct {
	mu     sync.Mutex
	pods   map[string]*podState // by namespace/name
	staged map[string]*stagedVolume
	locks  map[string]*sync.Mutex // one per unique volume name, serialising stage and unstage
}

type podState struct {
	uid     types.UID
	volumes map[string]*podVolume // by the Pod's volume name
}

type podVolume struct {
	vol       *volume
	published bool
	target    string
	stagedFor bool // the Pod counts as a user of the staged volume
}

type stagedVolume struct {
	vol   *volume
	path  string
	users map[types.UID]bool
}

func newState() *state {
	return &state{pods: map[string]*podState{}, staged: map[string]*stagedVolume{}, locks: map[string]*sync.Mutex{}}
}

func (s *state) volumeLock(unique string) *sync.Mutex {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, ok := s.locks[unique]
	if !ok {
		l = &sync.Mutex{}
		s.locks[unique] = l
	}
	return l
}

func (s *state) podKeys() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	keys := make([]string, 0, len(s.pods))
	for k := range s.pods {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// pod returns the Pod's state, or nil.
func (s *state) pod(key string) *podState {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pods[key]
}

// want records the volumes a Pod needs, keeping what was already done for them.
func (s *state) want(key string, uid types.UID, vols []*volume) *podState {
	s.mu.Lock()
	defer s.mu.Unlock()
	ps, ok := s.pods[key]
	if !ok {
		ps = &podState{uid: uid, volumes: map[string]*podVolume{}}
		s.pods[key] = ps
	}
	for _, v := range vols {
		if _, ok := ps.volumes[v.podVolume]; !ok {
			ps.volumes[v.podVolume] = &podVolume{vol: v}
		}
	}
	return ps
}

func (s *state) forget(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.pods, key)
}

// snapshot returns the Pod's volumes, so callers can work on them without the lock.
func (s *state) snapshot(ps *podState) []*podVolume {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*podVolume, 0, len(ps.volumes))
	for _, pv := range ps.volumes {
		out = append(out, pv)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].vol.podVolume < out[j].vol.podVolume })
	return out
}

func (s *state) update(fn func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fn()
}

func (s *state) stagedVolume(unique string) *stagedVolume {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.staged[unique]
}

// inUse is node.status.volumesInUse: every volume a Pod wants plus every volume still staged, sorted.
func (s *state) inUse() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	set := map[string]bool{}
	for _, ps := range s.pods {
		for _, pv := range ps.volumes {
			if !pv.vol.inline {
				set[pv.vol.unique] = true
			}
		}
	}
	for u := range s.staged {
		set[u] = true
	}
	out := make([]string, 0, len(set))
	for u := range set {
		out = append(out, u)
	}
	sort.Strings(out)
	return out
}
