package capacity

import (
	"context"
	"fmt"
	"hash/fnv"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
)

// targets are the (class, segment) pairs a created or deleted volume may have changed: every class in segments
// (by segmentKey), and every segment of classes.
type targets struct {
	classes  map[string]bool
	segments map[string]bool
}

func (t targets) empty() bool { return len(t.classes) == 0 && len(t.segments) == 0 }

func (t targets) match(w want) bool {
	return t.classes[w.class.Name] || (w.segment != nil && t.segments[segmentKey(w.segment)])
}

// Refresh asks for the objects a volume of class with node affinity affinity may have changed to be refreshed
// before the next poll, as upstream's provisioner does after CreateVolume and DeleteVolume: those of every class
// in the volume's segments when it has node affinity (each term of the affinity one segment, in the form the
// provisioner writes), else those of its class in every segment. It never blocks: the pairs are refreshed by Run.
func (c *Controller) Refresh(class string, affinity *v1.VolumeNodeAffinity) {
	segments := affinitySegments(affinity)
	if len(segments) == 0 && class == "" {
		return
	}
	c.mu.Lock()
	if c.targets.classes == nil {
		c.targets = targets{classes: map[string]bool{}, segments: map[string]bool{}}
	}
	if len(segments) == 0 {
		c.targets.classes[class] = true
	}
	for _, s := range segments {
		c.targets.segments[segmentKey(s)] = true
	}
	c.mu.Unlock()
	select {
	case c.refresh <- struct{}{}:
	default:
	}
}

// refreshTargets syncs the pairs Refresh named since the last call; no object is deleted here, that is the
// full pass's job.
func (c *Controller) refreshTargets(ctx context.Context, threads int) error {
	c.mu.Lock()
	t := c.targets
	c.targets = targets{}
	c.mu.Unlock()
	if t.empty() {
		return nil
	}
	all, err := c.desired()
	if err != nil {
		return err
	}
	var wants []want
	for _, w := range all {
		if t.match(w) {
			wants = append(wants, w)
		}
	}
	if len(wants) == 0 {
		return nil
	}
	existing, _, err := c.existing(ctx, all)
	if err != nil {
		return err
	}
	klog.FromContext(ctx).V(4).Info("Refreshing capacity after a volume change", "objects", len(wants))
	if errs := c.syncAll(ctx, threads, wants, existing); len(errs) > 0 {
		return fmt.Errorf("%d of %d capacity refreshes failed, first: %w", len(errs), len(wants), errs[0])
	}
	return nil
}

// affinitySegments reads the segments back from a PV's node affinity: one per term whose requirements are all
// "In" with one value, which is how the provisioner spells a segment. Other terms name no segment.
func affinitySegments(affinity *v1.VolumeNodeAffinity) []map[string]string {
	if affinity == nil || affinity.Required == nil {
		return nil
	}
	var out []map[string]string
	for _, term := range affinity.Required.NodeSelectorTerms {
		if len(term.MatchFields) > 0 || len(term.MatchExpressions) == 0 {
			continue
		}
		s := map[string]string{}
		for _, r := range term.MatchExpressions {
			if r.Operator != v1.NodeSelectorOpIn || len(r.Values) != 1 {
				s = nil
				break
			}
			s[r.Key] = r.Values[0]
		}
		if s != nil {
			out = append(out, s)
		}
	}
	return out
}

// labelValueMax is the length limit of a label value.
const labelValueMax = 63

// ManagedBy is the managed-by label value of a node's provisioner: external-provisioner-<node>, shortened as
// upstream shortens it when that is longer than a label value may be (node names may be 253 characters), so
// upstream and Stowage find each other's objects: the base is cut and joined with the FNV-1a hash of the base
// to the node name; when the node name alone leaves no room, the base is followed by the hash of the whole name.
func ManagedBy(node string) string {
	const base = managedByValue
	name := base + "-" + node
	if len(name) <= labelValueMax {
		return name
	}
	keep := labelValueMax - 10 - len(node) // 10: the hash and two dashes
	if keep <= 0 {
		short := base[:min(len(base), labelValueMax-9)] + "-" + fnvHex(name)
		return short[:min(labelValueMax, len(short))]
	}
	return base[:keep] + "-" + fnvHex(base) + "-" + node
}

// fnvHex is the 32-bit FNV-1a hash of s in 8 hex digits.
func fnvHex(s string) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(s))
	return fmt.Sprintf("%08x", h.Sum32())
}
