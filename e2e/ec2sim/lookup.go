package ec2sim

import "time"

// lookupVolume finds the volume a request names in a required parameter (param is its name in errors).
func (s *Server) lookupVolume(id, param string) (*volume, *apiError) {
	if id == "" {
		return nil, errMissing(param)
	}
	if aerr := checkIDs([]string{id}, "vol", "InvalidVolumeID.Malformed"); aerr != nil {
		return nil, aerr
	}
	v := s.st.Volumes[id]
	if v == nil {
		return nil, errVolumeNotFound(id)
	}
	return v, nil
}

// lookupSnapshot finds the snapshot a request names in a required parameter (param is its name in errors).
func (s *Server) lookupSnapshot(id, param string) (*snapshot, *apiError) {
	if id == "" {
		return nil, errMissing(param)
	}
	if aerr := checkIDs([]string{id}, "snap", "InvalidSnapshotID.Malformed"); aerr != nil {
		return nil, aerr
	}
	sn := s.st.Snapshots[id]
	if sn == nil {
		return nil, errSnapshotNotFound(id)
	}
	return sn, nil
}

// lookupReadyVolume is lookupVolume for operations EC2 refuses while the volume is being created.
func (s *Server) lookupReadyVolume(id, param string, now time.Time) (*volume, *apiError) {
	v, aerr := s.lookupVolume(id, param)
	if aerr != nil {
		return nil, aerr
	}
	if aerr := notCreating(v, now); aerr != nil {
		return nil, aerr
	}
	return v, nil
}

// notCreating refuses to work on a volume EC2 is still creating.
func notCreating(v *volume, now time.Time) *apiError {
	if st := v.status(now); st == "creating" {
		return errIncorrectState("Volume '%s' is in the '%s' state.", v.ID, st)
	}
	return nil
}
