package ec2sim

import (
	"strconv"
	"time"
)

type describeVolumesResponse struct {
	Volumes   []xVolume `xml:"volumeSet>item"`
	NextToken string    `xml:"nextToken,omitempty"`
}

// volumeSelection resolves the VolumeId list and filters of a describe call, filterValues answering a volume's
// values for a filter.
func (s *Server) volumeSelection(filterValues func(v *volume, name string) ([]string, bool)) selection {
	return selection{
		param:    "VolumeId",
		check:    func(ids []string) *apiError { return checkIDs(ids, "vol", "InvalidVolumeID.Malformed") },
		exists:   func(id string) bool { return s.st.Volumes[id] != nil },
		notFound: errVolumeNotFound,
		all:      func() []string { return mapKeys(s.st.Volumes) },
		values:   func(id, name string) ([]string, bool) { return filterValues(s.st.Volumes[id], name) },
	}
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
	page, next, aerr := s.volumeSelection(s.volumeFilterValues(r.now)).page(r, 5, 500)
	if aerr != nil {
		return nil, aerr
	}
	out := &describeVolumesResponse{NextToken: next}
	for _, id := range page {
		out.Volumes = append(out.Volumes, s.volumeXML(s.st.Volumes[id], r.now))
	}
	return out, nil
}
