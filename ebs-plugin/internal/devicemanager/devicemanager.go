// Package devicemanager picks the device name for an EBS attachment. EC2 needs the caller to pick a name not
// in use on the instance; two concurrent attaches to one node must not pick the same name, and names EC2 has
// just refused as "already in use" (often a detach that has not finished inside the instance) are avoided.
package devicemanager

import (
	"sync"
	"time"
)

// Names in upstream's order: the 52 two-letter names first so non-Nitro instances get them, then the rest.
func allNames() []string {
	var names []string
	for _, first := range []byte{'a', 'b'} {
		for c := byte('a'); c <= 'z'; c++ {
			names = append(names, "/dev/xvd"+string(first)+string(c))
		}
	}
	for c := byte('a'); c <= 'x'; c++ {
		names = append(names, "/dev/xvdd"+string(c))
	}
	for c := byte('b'); c <= 'z'; c++ {
		names = append(names, "/dev/xvd"+string(c))
	}
	for c := byte('b'); c <= 'z'; c++ {
		names = append(names, "/dev/sd"+string(c))
	}
	return append(names, "/dev/sda2")
}

// NameCount is how many device names an instance can be given: no more volumes than this can be attached to
// one instance, whatever its EBS limit.
func NameCount() int { return len(allNames()) }

// LikelyBadTTL is how long a refused name is avoided.
const LikelyBadTTL = time.Hour

// Manager tracks names being assigned per node.
type Manager struct {
	names []string
	now   func() time.Time

	mu        sync.Mutex
	inFlight  map[string]map[string]string // node -> volume -> name
	likelyBad map[string]map[string]time.Time
}

// New returns a Manager.
func New() *Manager {
	return &Manager{names: allNames(), now: time.Now, inFlight: map[string]map[string]string{}, likelyBad: map[string]map[string]time.Time{}}
}

// ErrNoFreeName means every name is in use on the node.
type ErrNoFreeName struct{ Node string }

func (e ErrNoFreeName) Error() string { return "no free device name on instance " + e.Node }

// Device is a name assigned to a volume on a node.
type Device struct {
	Name string
	// Existing is true when the volume is already attached under Name (from the instance's mappings).
	Existing bool
	release  func(taint bool)
}

// Release frees the in-flight claim. taint keeps the name reserved (a failed wait may still complete later).
func (d *Device) Release(taint bool) {
	if d.release != nil {
		d.release(taint)
	}
}

// Assign picks a name for volume on node. mapped is the instance's block device mappings (name -> volume ID).
func (m *Manager) Assign(node, volume string, mapped map[string]string) (*Device, error) {
	for name, vol := range mapped {
		if vol == volume {
			return &Device{Name: name, Existing: true}, nil
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	nodeFlight := m.inFlight[node]
	if nodeFlight == nil {
		nodeFlight = map[string]string{}
		m.inFlight[node] = nodeFlight
	}
	if name, ok := nodeFlight[volume]; ok {
		return &Device{Name: name, release: m.releaser(node, volume)}, nil
	}
	used := map[string]bool{}
	for name := range mapped {
		used[name] = true
	}
	for _, name := range nodeFlight {
		used[name] = true
	}
	bad := m.likelyBad[node]
	now := m.now()
	pick := ""
	lastResort := ""
	for _, name := range m.names {
		if used[name] {
			continue
		}
		if until, ok := bad[name]; ok && now.Before(until) {
			if lastResort == "" {
				lastResort = name
			}
			continue
		}
		pick = name
		break
	}
	if pick == "" {
		pick = lastResort
	}
	if pick == "" {
		return nil, ErrNoFreeName{Node: node}
	}
	nodeFlight[volume] = pick
	return &Device{Name: pick, release: m.releaser(node, volume)}, nil
}

func (m *Manager) releaser(node, volume string) func(bool) {
	return func(taint bool) {
		if taint {
			return
		}
		m.mu.Lock()
		defer m.mu.Unlock()
		delete(m.inFlight[node], volume)
		if len(m.inFlight[node]) == 0 {
			delete(m.inFlight, node)
		}
	}
}

// MarkLikelyBad records that EC2 said name is in use on node although the mappings did not show it.
func (m *Manager) MarkLikelyBad(node, name string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.likelyBad[node] == nil {
		m.likelyBad[node] = map[string]time.Time{}
	}
	m.likelyBad[node][name] = m.now().Add(LikelyBadTTL)
}
