package ec2sim

import (
	"strconv"
	"time"
)

type describeVolumesResponse struct {
	Volumes   []xVolume `xml:"volumeSet>item"`
	NextToken string    `xml:"nextToken,omitempty"`
}

// selectVolumes resolves the VolumeId list and filters of a describe call to sorted volume IDs.
func (s *Server) selectVolumes(r *request, filterValues func(v *volume, name string) ([]string, bool)) ([]string, bool, *apiError) {
	ids := r.form.list("VolumeId")
	if aerr := checkIDs(ids, "vol", "InvalidVolumeID.Malformed"); aerr != nil {
		return nil, false, aerr
	}
	filters, aerr := r.form.filters()
	if aerr != nil {
		return nil, false, aerr
	}
	var candidates []string
	if len(ids) > 0 {
		var missing []string
		seen := map[string]bool{}
		for _, id := range ids {
			if seen[id] {
				continue
			}
			seen[id] = true
			if s.st.Volumes[id] == nil {
				missing = append(missing, id)
			}
			candidates = append(candidates, id)
		}
		if len(missing) > 0 {
			return nil, false, errVolumeNotFound(missing...)
		}
	} else {
		for id := range s.st.Volumes {
			candidates = append(candidates, id)
		}
	}
	var out []string
	for _, id := range candidates {
		v := s.st.Volumes[id]
		ok, aerr := matchFilters(filters, func(name string) ([]string, bool) { return filterValues(v, name) })
		if aerr != nil {
			return nil, false, aerr
		}
		if ok {
			out = append(out, id)
		}
	}
	return out, len(ids) > 0, nil
}

func (s *Server) volumeFilterValues(now time.Time) func(v *volume, name string) ([]string, bool) {
	return func(v *volume, name string) ([]string, bool) {
		switch name {
		case "volume-id":
			return []string{v.ID}, true
		case "availability-zone":
			return []string{v.Zone}, true
		case "status":
			return []string{v.status(now)}, true
		case "volume-type":
			return []string{v.Type}, true
		case "size":
			return []string{strconv.FormatInt(v.Size, 10)}, true
		case "snapshot-id":
			return []string{v.SnapshotID}, true
		case "encrypted":
			return []string{boolString(v.Encrypted)}, true
		case "multi-attach-enabled":
			return []string{boolString(v.MultiAttach)}, true
		case "create-time":
			return []string{ts(v.CreateTime)}, true
		case "attachment.instance-id", "attachment.status", "attachment.device", "attachment.attach-time", "attachment.delete-on-termination":
			var out []string
			for _, a := range v.Attachments {
				switch name {
				case "attachment.instance-id":
					out = append(out, a.InstanceID)
				case "attachment.status":
					out = append(out, a.status())
				case "attachment.device":
					out = append(out, a.Device)
				case "attachment.attach-time":
					out = append(out, ts(a.AttachTime))
				default:
					out = append(out, "false")
				}
			}
			return out, true
		}
		return tagFilterValues(v.Tags, name)
	}
}

func (s *Server) describeVolumes(r *request) (any, *apiError) {
	ids, idsGiven, aerr := s.selectVolumes(r, s.volumeFilterValues(r.now))
	if aerr != nil {
		return nil, aerr
	}
	p, aerr := readPaging(r.form, 5, 500, idsGiven)
	if aerr != nil {
		return nil, aerr
	}
	if dry, aerr := r.dryRun(); aerr != nil {
		return nil, aerr
	} else if dry {
		return nil, errDryRun()
	}
	page, next := pageOf(ids, p)
	out := &describeVolumesResponse{NextToken: next}
	for _, id := range page {
		out.Volumes = append(out.Volumes, s.volumeXML(s.st.Volumes[id], r.now))
	}
	return out, nil
}
