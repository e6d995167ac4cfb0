package ec2sim

import (
	"net/http"
	"time"
)

func (s *Server) modificationXML(volID string, m *modification, now time.Time) xVolumeModification {
	x := xVolumeModification{
		VolumeID: volID, ModificationState: m.state(now),
		TargetSize: m.TargetSize, TargetIops: m.TargetIops, TargetVolumeType: m.TargetType,
		TargetThroughput: m.TargetThroughput, TargetMultiAttachEnabled: m.TargetMultiAttach,
		OriginalSize: m.OriginalSize, OriginalIops: m.OriginalIops, OriginalVolumeType: m.OriginalType,
		OriginalThroughput: m.OriginalThroughput, OriginalMultiAttachEnabled: m.OriginalMultiAttach,
		Progress: m.progress(now), StartTime: ts(m.StartTime),
	}
	if !now.Before(m.CompletedAt) {
		x.EndTime = ts(m.CompletedAt)
	}
	return x
}

type modifyVolumeResponse struct {
	Modification xVolumeModification `xml:"volumeModification"`
}

func (s *Server) modifyVolume(r *request) (any, *apiError) {
	f := r.form
	id := f.str("VolumeId")
	v, aerr := s.lookupReadyVolume(id, "volumeId", r.now)
	if aerr != nil {
		return nil, aerr
	}
	var last *modification
	if n := len(v.Modifications); n > 0 {
		last = v.Modifications[n-1]
		if st := last.state(r.now); st != "completed" {
			return nil, newError(http.StatusBadRequest, "IncorrectModificationState",
				"Volume %s is in the modification state '%s' and cannot be modified until the modification completes.", id, st)
		}
		if s.cfg.ModifyCooldown > 0 && r.now.Before(last.StartTime.Add(s.cfg.ModifyCooldown)) {
			return nil, newError(http.StatusBadRequest, "VolumeModificationRateExceeded",
				"You've reached the maximum modification rate per volume limit. Wait at least %s between modifications per EBS volume.", s.cfg.ModifyCooldown)
		}
	}
	sp, aerr := readSpec(f)
	if aerr != nil {
		return nil, aerr
	}
	_, sizeSet, _ := f.integer("Size")
	_, maSet := f.get("MultiAttachEnabled")
	if !sizeSet {
		sp.Size = v.Size
	} else if sp.Size < v.Size {
		return nil, errInvalidValue("New size cannot be smaller than existing size")
	}
	if sp.Type == "" {
		sp.Type = v.Type
	}
	if _, ok := volumeTypes[sp.Type]; ok {
		if !sp.IopsSet && volumeTypes[sp.Type].iopsPerGiB > 0 && volumeTypes[v.Type].iopsPerGiB > 0 && sp.Type == v.Type {
			sp.Iops, sp.IopsSet = v.Iops, true
		}
		if !sp.TputSet && reportsThroughput(sp.Type) && sp.Type == v.Type {
			sp.Throughput, sp.TputSet = v.Throughput, true
		}
	}
	if !maSet {
		sp.MultiAttach = v.MultiAttach
	}
	iops, tput, aerr := sp.resolve()
	if aerr != nil {
		return nil, aerr
	}
	if sp.MultiAttach != v.MultiAttach && len(v.Attachments) > 0 {
		return nil, errIncorrectState("Volume '%s' must be detached to change multiAttachEnabled.", id)
	}
	if sp.Size == v.Size && sp.Type == v.Type && iops == v.Iops && tput == v.Throughput && sp.MultiAttach == v.MultiAttach {
		return nil, errCombination("New configuration is the same as the existing configuration of volume %s.", id)
	}
	if aerr := r.stopIfDryRun(); aerr != nil {
		return nil, aerr
	}
	m := &modification{
		StartTime:    r.now,
		OptimizingAt: r.now.Add(s.scaled(modifyingDelay)),
		OriginalSize: v.Size, OriginalType: v.Type, OriginalIops: v.Iops, OriginalThroughput: v.Throughput,
		OriginalMultiAttach: v.MultiAttach,
		TargetSize:          sp.Size, TargetType: sp.Type, TargetIops: iops, TargetThroughput: tput, TargetMultiAttach: sp.MultiAttach,
	}
	m.CompletedAt = m.OptimizingAt.Add(s.scaled(optimizingBase + time.Duration(sp.Size)*optimizingPerGiB))
	v.Modifications = append(v.Modifications, m)
	// Keep the history short; EC2 only answers the latest modification per volume.
	if len(v.Modifications) > 10 {
		v.Modifications = v.Modifications[len(v.Modifications)-10:]
	}
	r.mutated = true
	return &modifyVolumeResponse{Modification: s.modificationXML(id, m, r.now)}, nil
}

type describeVolumesModificationsResponse struct {
	Modifications []xVolumeModification `xml:"volumeModificationSet>item"`
	NextToken     string                `xml:"nextToken,omitempty"`
}

func (s *Server) describeVolumesModifications(r *request) (any, *apiError) {
	latest := func(id string) *modification {
		v := s.st.Volumes[id]
		return v.Modifications[len(v.Modifications)-1]
	}
	modified := func(id string) bool { return len(s.st.Volumes[id].Modifications) > 0 }
	page, next, aerr := selection{
		param:    "VolumeId",
		check:    func(ids []string) *apiError { return checkIDs(ids, "vol", "InvalidVolumeID.Malformed") },
		exists:   func(id string) bool { return s.st.Volumes[id] != nil },
		notFound: errVolumeNotFound,
		named: func(ids []string) *apiError {
			if unmodified := missingIDs(ids, modified); len(unmodified) > 0 {
				return errNotFound("InvalidVolumeModification.NotFound", "modification for volume", unmodified)
			}
			return nil
		},
		all: func() []string {
			var ids []string
			for id := range s.st.Volumes {
				if modified(id) {
					ids = append(ids, id)
				}
			}
			return ids
		},
		values: func(id, name string) ([]string, bool) {
			m := latest(id)
			switch name {
			case "volume-id":
				return []string{id}, true
			case "modification-state":
				return []string{m.state(r.now)}, true
			case "target-volume-type":
				return []string{m.TargetType}, true
			case "original-volume-type":
				return []string{m.OriginalType}, true
			case "start-time":
				return []string{ts(m.StartTime)}, true
			}
			return nil, false
		},
	}.page(r, 1, 500)
	if aerr != nil {
		return nil, aerr
	}
	out := &describeVolumesModificationsResponse{NextToken: next}
	for _, id := range page {
		out.Modifications = append(out.Modifications, s.modificationXML(id, latest(id), r.now))
	}
	return out, nil
}
