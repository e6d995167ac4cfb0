package provision

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
)

// segment is one topology segment: key -> value, taken from Node labels for the keys the driver registered on
// that node's CSINode.
type segment map[string]string

// idEscaper escapes the separators of id inside keys and values: allowedTopologies values need not be label
// values, and {a: "b,c=d"} must not be spelt as {a: "b", c: "d"}. Label keys and values have none of these
// characters, so their spelling, and the order it gives, is unchanged.
var idEscaper = strings.NewReplacer(`\`, `\\`, "=", `\=`, ",", `\,`)

// id is a canonical spelling of s, for de-duplication and stable order.
func (s segment) id() string {
	keys := make([]string, 0, len(s))
	for k := range s {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(idEscaper.Replace(k))
		b.WriteByte('=')
		b.WriteString(idEscaper.Replace(s[k]))
		b.WriteByte(',')
	}
	return b.String()
}

// subsetOf reports whether every key of s has the same value in other.
func (s segment) subsetOf(other segment) bool {
	for k, v := range s {
		if w, ok := other[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// topologyKeys returns the keys the driver registered on a CSINode; ok is false when it is not registered there.
func (p *Provisioner) topologyKeys(n *storagev1.CSINode) ([]string, bool) {
	for _, d := range n.Spec.Drivers {
		if d.Name == p.cfg.DriverName {
			return d.TopologyKeys, true
		}
	}
	return nil, false
}

// nodeSegment is the segment of one node for keys; an error names the missing label.
func nodeSegment(node *v1.Node, keys []string) (segment, error) {
	s := segment{}
	for _, k := range keys {
		v, ok := node.Labels[k]
		if !ok {
			return nil, fmt.Errorf("node %s has no label %q, a topology key of its CSINode", node.Name, k)
		}
		s[k] = v
	}
	return s, nil
}

// accessibility computes CreateVolume's accessibility_requirements with upstream's rules: the segment a selected
// node lies in comes first in preferred (and the node's is the only one with --strict-topology); requisite is the
// StorageClass's allowedTopologies, or else every segment of the nodes that run the driver with the same keys. A
// selected node outside allowedTopologies is an error, never a volume outside them.
// Immediate binding without --immediate-topology leaves topology to the driver unless allowedTopologies is set.
func (p *Provisioner) accessibility(class *storagev1.StorageClass, selectedNode string, claimName string) (*csi.TopologyRequirement, error) {
	if !p.cfg.Capabilities.Topology {
		return nil, nil
	}
	allowed := flattenAllowed(class.AllowedTopologies)

	if selectedNode != "" {
		csiNode, err := p.csiNodes.Get(selectedNode)
		if err != nil {
			return nil, fmt.Errorf("get CSINode %s of the selected node: %w", selectedNode, err)
		}
		keys, ok := p.topologyKeys(csiNode)
		if !ok {
			return nil, fmt.Errorf("driver %s is not registered on the selected node %s", p.cfg.DriverName, selectedNode)
		}
		node, err := p.nodes.Get(selectedNode)
		if err != nil {
			return nil, fmt.Errorf("get selected node %s: %w", selectedNode, err)
		}
		selected, err := nodeSegment(node, keys)
		if err != nil {
			return nil, err
		}
		if p.cfg.StrictTopology {
			// As upstream: a class's allowedTopologies bound the selected node too.
			if len(allowed) > 0 && !slices.ContainsFunc(allowed, func(a segment) bool { return a.subsetOf(selected) }) {
				return nil, fmt.Errorf("topology %v of the selected node %s is not in the StorageClass's allowedTopologies %v", selected, selectedNode, allowed)
			}
			t := []*csi.Topology{{Segments: selected}}
			return &csi.TopologyRequirement{Requisite: t, Preferred: t}, nil
		}
		requisite := allowed
		if len(requisite) == 0 {
			if requisite, err = p.driverSegments(keys); err != nil {
				return nil, err
			}
		}
		return selectedFirst(requisite, selected, selectedNode)
	}

	if !p.cfg.ImmediateTopology && len(allowed) == 0 {
		return nil, nil
	}
	requisite := allowed
	if len(requisite) == 0 {
		var err error
		if requisite, err = p.driverSegments(nil); err != nil {
			return nil, err
		}
	}
	if len(requisite) == 0 {
		return nil, fmt.Errorf("no node runs driver %s with topology keys, so there is no topology to provision in", p.cfg.DriverName)
	}
	// Spread immediate volumes over the segments as upstream does (StatefulSet replicas round-robin, see
	// spreadOffset): each claim starts its preference list at a different place.
	return requirement(requisite, spreadOffset(claimName, len(requisite))), nil
}

// selectedFirst is the requirement of a claim whose node the scheduler selected: requisite as it is, and
// preferred from the first segment (in requisite's order) the node lies in. A node in none, possible only when
// the class's allowedTopologies exclude it, is an error as upstream's: provisioning outside the allowed
// topologies, or in a topology the node cannot reach, would both be wrong.
func selectedFirst(requisite []segment, selected segment, nodeName string) (*csi.TopologyRequirement, error) {
	slices.SortFunc(requisite, compareSegments)
	i := slices.IndexFunc(requisite, func(s segment) bool { return s.subsetOf(selected) })
	if i < 0 {
		return nil, fmt.Errorf("topology %v of the selected node %s is not in the requisite topologies %v", selected, nodeName, requisite)
	}
	return requirement(requisite, i), nil
}

// requirement sorts requisite and builds preferred from it, starting at index offset.
func requirement(requisite []segment, offset int) *csi.TopologyRequirement {
	slices.SortFunc(requisite, compareSegments)
	out := &csi.TopologyRequirement{}
	for _, s := range requisite {
		out.Requisite = append(out.Requisite, &csi.Topology{Segments: s})
	}
	for i := range requisite {
		out.Preferred = append(out.Preferred, &csi.Topology{Segments: requisite[(offset+i)%len(requisite)]})
	}
	return out
}

// driverSegments collects the distinct segments of every node whose CSINode registers the driver with exactly
// keys (with nil keys: the keys of the first such CSINode by name). Nodes missing a label are skipped.
func (p *Provisioner) driverSegments(keys []string) ([]segment, error) {
	csiNodes, err := p.csiNodes.List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("list CSINodes: %w", err)
	}
	sort.Slice(csiNodes, func(i, j int) bool { return csiNodes[i].Name < csiNodes[j].Name })
	want := ""
	if keys != nil {
		want = keySet(keys)
	}
	seen := map[string]bool{}
	var out []segment
	for _, cn := range csiNodes {
		k, ok := p.topologyKeys(cn)
		if !ok || len(k) == 0 {
			continue
		}
		if want == "" {
			want = keySet(k)
		}
		if keySet(k) != want {
			continue
		}
		node, err := p.nodes.Get(cn.Name)
		if err != nil {
			continue
		}
		s, err := nodeSegment(node, k)
		if err != nil {
			continue
		}
		if !seen[s.id()] {
			seen[s.id()] = true
			out = append(out, s)
		}
	}
	return out, nil
}

func keySet(keys []string) string {
	c := append([]string(nil), keys...)
	sort.Strings(c)
	return strings.Join(c, ",")
}

// flattenAllowed expands allowedTopologies into segments: a term with several values per key stands for every
// combination of them.
func flattenAllowed(terms []v1.TopologySelectorTerm) []segment {
	var out []segment
	seen := map[string]bool{}
	for _, term := range terms {
		combos := []segment{{}}
		for _, e := range term.MatchLabelExpressions {
			var next []segment
			for _, c := range combos {
				for _, v := range e.Values {
					n := segment{}
					for k, x := range c {
						n[k] = x
					}
					n[e.Key] = v
					next = append(next, n)
				}
			}
			combos = next
		}
		for _, c := range combos {
			if len(c) > 0 && !seen[c.id()] {
				seen[c.id()] = true
				out = append(out, c)
			}
		}
	}
	return out
}

// nodeAffinity turns the volume's accessible topology into PV node affinity: one term per segment, so a node
// matching any segment may use the volume.
func nodeAffinity(topologies []*csi.Topology) *v1.VolumeNodeAffinity {
	var terms []v1.NodeSelectorTerm
	for _, t := range topologies {
		if len(t.GetSegments()) == 0 {
			continue
		}
		keys := make([]string, 0, len(t.Segments))
		for k := range t.Segments {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var term v1.NodeSelectorTerm
		for _, k := range keys {
			term.MatchExpressions = append(term.MatchExpressions, v1.NodeSelectorRequirement{
				Key: k, Operator: v1.NodeSelectorOpIn, Values: []string{t.Segments[k]},
			})
		}
		terms = append(terms, term)
	}
	if len(terms) == 0 {
		return nil
	}
	return &v1.VolumeNodeAffinity{Required: &v1.NodeSelector{NodeSelectorTerms: terms}}
}

// TopologySegments lists the distinct topology segments of every node that runs driver (whatever keys it
// registered), for capacity tracking. A driver without topology keys yields none.
func TopologySegments(driver string, csiNodes storagelisters.CSINodeLister, nodes corelisters.NodeLister) ([]map[string]string, error) {
	list, err := csiNodes.List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("list CSINodes: %w", err)
	}
	seen := map[string]bool{}
	var out []map[string]string
	for _, cn := range list {
		for _, d := range cn.Spec.Drivers {
			if d.Name != driver || len(d.TopologyKeys) == 0 {
				continue
			}
			node, err := nodes.Get(cn.Name)
			if err != nil {
				continue
			}
			s, err := nodeSegment(node, d.TopologyKeys)
			if err != nil || seen[s.id()] {
				continue
			}
			seen[s.id()] = true
			out = append(out, s)
		}
	}
	sort.Slice(out, func(i, j int) bool { return segment(out[i]).id() < segment(out[j]).id() })
	return out, nil
}

// DriverParameters is a StorageClass's parameters as CreateVolume gets them (every csi.storage.k8s.io/ key
// removed), for GetCapacity; it fails like provisioning would on a bad class.
func DriverParameters(params map[string]string) (map[string]string, string, error) {
	c, err := parseClassParams(params)
	if err != nil {
		return nil, "", err
	}
	return c.driver, c.fsType, nil
}
