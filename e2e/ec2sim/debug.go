package ec2sim

import (
	"sort"
)

// StateDump is every volume, attachment and snapshot as the emulator sees them now (GET /debug/state).
type StateDump struct {
	Volumes     []VolumeState     `json:"volumes"`
	Attachments []AttachmentState `json:"attachments"`
	Snapshots   []SnapshotState   `json:"snapshots"`
}

type VolumeState struct {
	ID          string            `json:"id"`
	Zone        string            `json:"zone"`
	State       string            `json:"state"`
	Type        string            `json:"type"`
	SizeGiB     int64             `json:"sizeGiB"`
	Iops        int64             `json:"iops,omitempty"`
	Throughput  int64             `json:"throughput,omitempty"`
	MultiAttach bool              `json:"multiAttach,omitempty"`
	Encrypted   bool              `json:"encrypted,omitempty"`
	SnapshotID  string            `json:"snapshotId,omitempty"`
	Tags        map[string]string `json:"tags,omitempty"`
	// Modification is the state of the latest modification, if any.
	Modification string `json:"modification,omitempty"`
	File         string `json:"file"`
}

type AttachmentState struct {
	VolumeID   string `json:"volumeId"`
	InstanceID string `json:"instanceId"`
	Device     string `json:"device"`
	State      string `json:"state"`
	// LoopDevice and Link are set while a local attachment has its block device.
	LoopDevice string `json:"loopDevice,omitempty"`
	Link       string `json:"link,omitempty"`
}

type SnapshotState struct {
	ID       string            `json:"id"`
	VolumeID string            `json:"volumeId"`
	State    string            `json:"state"`
	SizeGiB  int64             `json:"sizeGiB"`
	Tags     map[string]string `json:"tags,omitempty"`
}

func tagMap(ts []tag) map[string]string {
	if len(ts) == 0 {
		return nil
	}
	m := make(map[string]string, len(ts))
	for _, t := range ts {
		m[t.Key] = t.Value
	}
	return m
}

// State returns the emulator's state now, sorted by ID.
func (s *Server) State() StateDump {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock()
	if s.settle(now) {
		s.persist()
	}
	d := StateDump{Volumes: []VolumeState{}, Attachments: []AttachmentState{}, Snapshots: []SnapshotState{}}
	for _, v := range s.st.Volumes {
		vs := VolumeState{ID: v.ID, Zone: v.Zone, State: v.status(now), Type: v.Type, SizeGiB: v.Size, Iops: v.Iops,
			Throughput: v.Throughput, MultiAttach: v.MultiAttach, Encrypted: v.Encrypted, SnapshotID: v.SnapshotID,
			Tags: tagMap(v.Tags), File: s.volumePath(v.ID)}
		if n := len(v.Modifications); n > 0 {
			vs.Modification = v.Modifications[n-1].state(now)
		}
		d.Volumes = append(d.Volumes, vs)
		for _, a := range v.Attachments {
			as := AttachmentState{VolumeID: v.ID, InstanceID: a.InstanceID, Device: a.Device, State: a.status()}
			if s.instances[a.InstanceID].Local {
				as.LoopDevice, as.Link = s.loops.device(v.ID)
			}
			d.Attachments = append(d.Attachments, as)
		}
	}
	for _, sn := range s.st.Snapshots {
		d.Snapshots = append(d.Snapshots, SnapshotState{ID: sn.ID, VolumeID: sn.VolumeID, State: sn.status(now),
			SizeGiB: sn.VolumeSize, Tags: tagMap(sn.Tags)})
	}
	sort.Slice(d.Volumes, func(i, j int) bool { return d.Volumes[i].ID < d.Volumes[j].ID })
	sort.Slice(d.Attachments, func(i, j int) bool {
		if d.Attachments[i].VolumeID != d.Attachments[j].VolumeID {
			return d.Attachments[i].VolumeID < d.Attachments[j].VolumeID
		}
		return d.Attachments[i].InstanceID < d.Attachments[j].InstanceID
	})
	sort.Slice(d.Snapshots, func(i, j int) bool { return d.Snapshots[i].ID < d.Snapshots[j].ID })
	return d
}
