package ec2sim

import (
	"net/http"
	"strings"
)

// taggable finds the tag list of a resource by ID.
func (s *Server) taggable(ids []string) ([]*[]tag, *apiError) {
	var out []*[]tag
	var missingVol, missingSnap []string
	for _, id := range ids {
		switch {
		case strings.HasPrefix(id, "vol-"):
			if v := s.st.Volumes[id]; v != nil {
				out = append(out, &v.Tags)
			} else {
				missingVol = append(missingVol, id)
			}
		case strings.HasPrefix(id, "snap-"):
			if sn := s.st.Snapshots[id]; sn != nil {
				out = append(out, &sn.Tags)
			} else {
				missingSnap = append(missingSnap, id)
			}
		default:
			return nil, newError(http.StatusBadRequest, "InvalidID", "The ID '%s' is not valid", id)
		}
	}
	if len(missingVol) > 0 {
		return nil, errVolumeNotFound(missingVol...)
	}
	if len(missingSnap) > 0 {
		return nil, errSnapshotNotFound(missingSnap...)
	}
	return out, nil
}

func (s *Server) createTags(r *request) (any, *apiError) {
	ids := r.form.list("ResourceId")
	if len(ids) == 0 {
		return nil, errMissing("resourceIdSet")
	}
	add, aerr := r.form.tags("Tag")
	if aerr != nil {
		return nil, aerr
	}
	if len(add) == 0 {
		return nil, errMissing("tagSet")
	}
	if aerr := validateTags(add); aerr != nil {
		return nil, aerr
	}
	lists, aerr := s.taggable(ids)
	if aerr != nil {
		return nil, aerr
	}
	for _, l := range lists {
		if merged := setTags(append([]tag(nil), *l...), add); len(merged) > 50 {
			return nil, newError(http.StatusBadRequest, "TagLimitExceeded", "The maximum number of tags per resource is 50.")
		}
	}
	if aerr := r.stopIfDryRun(); aerr != nil {
		return nil, aerr
	}
	for _, l := range lists {
		*l = setTags(*l, add)
	}
	r.mutated = true
	return &returnTrue{Return: true}, nil
}

func (s *Server) deleteTags(r *request) (any, *apiError) {
	ids := r.form.list("ResourceId")
	if len(ids) == 0 {
		return nil, errMissing("resourceIdSet")
	}
	var del []tag
	var valueGiven []bool
	for _, g := range r.form.group("Tag") {
		k, ok := g.get("Key")
		if !ok {
			return nil, errMissing("Tag.Key")
		}
		v, hasValue := g.get("Value")
		del = append(del, tag{Key: k, Value: v})
		valueGiven = append(valueGiven, hasValue)
	}
	lists, aerr := s.taggable(ids)
	if aerr != nil {
		return nil, aerr
	}
	if aerr := r.stopIfDryRun(); aerr != nil {
		return nil, aerr
	}
	for _, l := range lists {
		if len(del) == 0 {
			// Without tags, EC2 deletes every tag of the resources.
			*l = nil
			continue
		}
		*l = removeTags(*l, del, valueGiven)
	}
	r.mutated = true
	return &returnTrue{Return: true}, nil
}
