package ec2sim

import (
	"strconv"
	"time"
)

func (s *Server) snapshotXML(sn *snapshot, now time.Time) xSnapshot {
	return xSnapshot{
		SnapshotID:  sn.ID,
		VolumeID:    sn.VolumeID,
		Status:      sn.status(now),
		StartTime:   ts(sn.StartTime),
		Progress:    strconv.FormatInt(progressBetween(sn.StartTime, sn.CompleteAt, now), 10) + "%",
		OwnerID:     s.cfg.AccountID,
		VolumeSize:  sn.VolumeSize,
		Description: sn.Description,
		Encrypted:   sn.Encrypted,
		KmsKeyID:    sn.KmsKeyID,
		OutpostArn:  sn.OutpostArn,
		StorageTier: "standard",
		Tags:        xTags(sn.Tags),
	}
}

func (s *Server) createSnapshot(r *request) (any, *apiError) {
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
	desc := f.str("Description")
	if len(desc) > 255 {
		return nil, errInvalidValue("Value for parameter description is too long; maximum is 255 characters.")
	}
	tags, aerr := f.tagSpecs("snapshot")
	if aerr != nil {
		return nil, aerr
	}
	if dry, aerr := r.dryRun(); aerr != nil {
		return nil, aerr
	} else if dry {
		return nil, errDryRun()
	}
	sn := &snapshot{
		ID: newID("snap"), VolumeID: id, VolumeSize: v.Size, Description: desc, Encrypted: v.Encrypted,
		KmsKeyID: v.KmsKeyID, OutpostArn: f.str("OutpostArn"), Tags: tags, StartTime: r.now,
		CompleteAt: r.now.Add(s.scaled(snapshotBase + time.Duration(v.Size)*snapshotPerGiB)),
	}
	// The data is copied now: a snapshot is the volume as it was when it was requested.
	if err := copySparse(s.volumePath(id), s.snapshotPath(sn.ID), v.Size<<30); err != nil {
		s.log.Error(err, "Copying volume to snapshot", "volume", id, "snapshot", sn.ID)
		return nil, errInternal()
	}
	s.st.Snapshots[sn.ID] = sn
	r.mutated = true
	x := s.snapshotXML(sn, r.now)
	return &x, nil
}

type describeSnapshotsResponse struct {
	Snapshots []xSnapshot `xml:"snapshotSet>item"`
	NextToken string      `xml:"nextToken,omitempty"`
}

func (s *Server) describeSnapshots(r *request) (any, *apiError) {
	f := r.form
	ids := f.list("SnapshotId")
	if aerr := checkIDs(ids, "snap", "InvalidSnapshotID.Malformed"); aerr != nil {
		return nil, aerr
	}
	filters, aerr := f.filters()
	if aerr != nil {
		return nil, aerr
	}
	owners := f.list("Owner")
	ownedByUs := len(owners) == 0 || contains(owners, "self") || contains(owners, s.cfg.AccountID)
	var candidates []string
	if len(ids) > 0 {
		var missing []string
		seen := map[string]bool{}
		for _, id := range ids {
			if seen[id] {
				continue
			}
			seen[id] = true
			if s.st.Snapshots[id] == nil {
				missing = append(missing, id)
			}
			candidates = append(candidates, id)
		}
		if len(missing) > 0 {
			return nil, errSnapshotNotFound(missing...)
		}
	} else if ownedByUs {
		for id := range s.st.Snapshots {
			candidates = append(candidates, id)
		}
	}
	var selected []string
	for _, id := range candidates {
		sn := s.st.Snapshots[id]
		ok, aerr := matchFilters(filters, func(name string) ([]string, bool) {
			switch name {
			case "snapshot-id":
				return []string{sn.ID}, true
			case "volume-id":
				return []string{sn.VolumeID}, true
			case "status":
				return []string{sn.status(r.now)}, true
			case "volume-size":
				return []string{strconv.FormatInt(sn.VolumeSize, 10)}, true
			case "owner-id":
				return []string{s.cfg.AccountID}, true
			case "description":
				return []string{sn.Description}, true
			case "encrypted":
				return []string{boolString(sn.Encrypted)}, true
			case "start-time":
				return []string{ts(sn.StartTime)}, true
			case "progress":
				return []string{strconv.FormatInt(progressBetween(sn.StartTime, sn.CompleteAt, r.now), 10) + "%"}, true
			}
			return tagFilterValues(sn.Tags, name)
		})
		if aerr != nil {
			return nil, aerr
		}
		if ok {
			selected = append(selected, id)
		}
	}
	p, aerr := readPaging(f, 5, 1000, len(ids) > 0)
	if aerr != nil {
		return nil, aerr
	}
	if dry, aerr := r.dryRun(); aerr != nil {
		return nil, aerr
	} else if dry {
		return nil, errDryRun()
	}
	page, next := pageOf(selected, p)
	out := &describeSnapshotsResponse{NextToken: next}
	for _, id := range page {
		out.Snapshots = append(out.Snapshots, s.snapshotXML(s.st.Snapshots[id], r.now))
	}
	return out, nil
}

func (s *Server) deleteSnapshot(r *request) (any, *apiError) {
	id := r.form.str("SnapshotId")
	if id == "" {
		return nil, errMissing("snapshotId")
	}
	if aerr := checkIDs([]string{id}, "snap", "InvalidSnapshotID.Malformed"); aerr != nil {
		return nil, aerr
	}
	sn := s.st.Snapshots[id]
	if sn == nil {
		return nil, errSnapshotNotFound(id)
	}
	if sn.Lock != nil && sn.Lock.state(r.now) != "expired" {
		return nil, errSnapshotLocked(id, sn.Lock)
	}
	if dry, aerr := r.dryRun(); aerr != nil {
		return nil, aerr
	} else if dry {
		return nil, errDryRun()
	}
	if err := removeFile(s.snapshotPath(id)); err != nil {
		s.log.Error(err, "Removing snapshot file", "snapshot", id)
	}
	delete(s.st.Snapshots, id)
	r.mutated = true
	return &returnTrue{Return: true}, nil
}

type xFSRSuccess struct {
	SnapshotID       string `xml:"snapshotId"`
	AvailabilityZone string `xml:"availabilityZone"`
	State            string `xml:"state"`
	OwnerID          string `xml:"ownerId"`
	EnablingTime     string `xml:"enablingTime"`
}

type xFSRStateError struct {
	Code    string `xml:"code"`
	Message string `xml:"message"`
}

type xFSRStateErrorItem struct {
	AvailabilityZone string         `xml:"availabilityZone"`
	Error            xFSRStateError `xml:"error"`
}

type xFSRErrorItem struct {
	SnapshotID string               `xml:"snapshotId"`
	Errors     []xFSRStateErrorItem `xml:"fastSnapshotRestoreStateErrorSet>item"`
}

type enableFSRResponse struct {
	Successful   []xFSRSuccess   `xml:"successful>item"`
	Unsuccessful []xFSRErrorItem `xml:"unsuccessful>item"`
}

func (s *Server) enableFastSnapshotRestores(r *request) (any, *apiError) {
	zones := r.form.list("AvailabilityZone")
	for _, id := range r.form.list("AvailabilityZoneId") {
		z, ok := s.zoneByID(id)
		if !ok {
			return nil, errInvalidValue("Invalid availability zone ID: [%s]", id)
		}
		zones = append(zones, z)
	}
	if len(zones) == 0 {
		return nil, errMissing("availabilityZoneSet")
	}
	for _, z := range zones {
		if !s.validZone(z) {
			return nil, errInvalidValue("Invalid availability zone: [%s]", z)
		}
	}
	ids := r.form.list("SourceSnapshotId")
	if len(ids) == 0 {
		return nil, errMissing("sourceSnapshotIdSet")
	}
	if dry, aerr := r.dryRun(); aerr != nil {
		return nil, aerr
	} else if dry {
		return nil, errDryRun()
	}
	out := &enableFSRResponse{}
	for _, id := range ids {
		sn := s.st.Snapshots[id]
		if sn == nil {
			item := xFSRErrorItem{SnapshotID: id}
			for _, z := range zones {
				item.Errors = append(item.Errors, xFSRStateErrorItem{AvailabilityZone: z, Error: xFSRStateError{
					Code: "InvalidSnapshot.NotFound", Message: "The snapshot '" + id + "' does not exist.",
				}})
			}
			out.Unsuccessful = append(out.Unsuccessful, item)
			continue
		}
		if sn.FastRestore == nil {
			sn.FastRestore = map[string]bool{}
		}
		for _, z := range zones {
			sn.FastRestore[z] = true
			out.Successful = append(out.Successful, xFSRSuccess{SnapshotID: id, AvailabilityZone: z, State: "enabling",
				OwnerID: s.cfg.AccountID, EnablingTime: ts(r.now)})
		}
		r.mutated = true
	}
	return out, nil
}
