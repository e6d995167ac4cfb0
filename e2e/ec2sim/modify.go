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
	if id == "" {
		return nil, errMissing("volumeId")
	}
	if aerr := checkIDs([]string{id}, "vol", "InvalidVolumeID.Malformed"); aerr != nil {
		return nil, aerr
	}
	v := s.st.Volumes[id]
	if v == nil {
		return nil, errVolumeNotFound(id)
	}
	if st := v.status(r.now); st == "creating" {
		return nil, errIncorrectState("Volume '%s' is in the '%s' state.", id, st)
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
	if dry, aerr := r.dryRun(); aerr != nil {
		return nil, aerr
	} else if dry {
		return nil, errDryRun()
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
	f := r.form
	ids := f.list("VolumeId")
	if aerr := checkIDs(ids, "vol", "InvalidVolumeID.Malformed"); aerr != nil {
		return nil, aerr
	}
	filters, aerr := f.filters()
	if aerr != nil {
		return nil, aerr
	}
	var candidates []string
	if len(ids) > 0 {
		var missing, unmodified []string
		seen := map[string]bool{}
		for _, id := range ids {
			if seen[id] {
				continue
			}
			seen[id] = true
			switch v := s.st.Volumes[id]; {
			case v == nil:
				missing = append(missing, id)
			case len(v.Modifications) == 0:
				unmodified = append(unmodified, id)
			}
			candidates = append(candidates, id)
		}
		if len(missing) > 0 {
			return nil, errVolumeNotFound(missing...)
		}
		if len(unmodified) > 0 {
			return nil, errNotFound("InvalidVolumeModification.NotFound", "modification for volume", unmodified)
		}
	} else {
		for id, v := range s.st.Volumes {
			if len(v.Modifications) > 0 {
				candidates = append(candidates, id)
			}
		}
	}
	var selected []string
	for _, id := range candidates {
		v := s.st.Volumes[id]
		m := v.Modifications[len(v.Modifications)-1]
		ok, aerr := matchFilters(filters, func(name string) ([]string, bool) {
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
		})
		if aerr != nil {
			return nil, aerr
		}
		if ok {
			selected = append(selected, id)
		}
	}
	p, aerr := readPaging(f, 1, 500, len(ids) > 0)
	if aerr != nil {
		return nil, aerr
	}
	if dry, aerr := r.dryRun(); aerr != nil {
		return nil, aerr
	} else if dry {
		return nil, errDryRun()
	}
	page, next := pageOf(selected, p)
	out := &describeVolumesModificationsResponse{NextToken: next}
	for _, id := range page {
		v := s.st.Volumes[id]
		out.Modifications = append(out.Modifications, s.modificationXML(id, v.Modifications[len(v.Modifications)-1], r.now))
	}
	return out, nil
}
