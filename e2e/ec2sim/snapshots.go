package ec2sim

import (
	"strconv"
	"time"
)

// snapshotProgress is a snapshot's progress as EC2 writes it, a percentage.
func snapshotProgress(sn *snapshot, now time.Time) string {
	return strconv.FormatInt(progressBetween(sn.StartTime, sn.CompleteAt, now), 10) + "%"
}

func (s *Server) snapshotXML(sn *snapshot, now time.Time) xSnapshot {
	return xSnapshot{
		SnapshotID:  sn.ID,
		VolumeID:    sn.VolumeID,
		Status:      sn.status(now),
		StartTime:   ts(sn.StartTime),
		Progress:    snapshotProgress(sn, now),
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
	v, aerr := s.lookupReadyVolume(id, "volumeId", r.now)
	if aerr != nil {
		return nil, aerr
	}
	desc := f.str("Description")
	if len(desc) > 255 {
		return nil, errInvalidValue("Value for parameter description is too long; maximum is 255 characters.")
	}
	tags, aerr := f.tagSpecs("snapshot")
	if aerr != nil {
		return nil, aerr
	}
	if aerr := r.stopIfDryRun(); aerr != nil {
		return nil, aerr
	}
	if aerr := s.checkSnapshotQuota(); aerr != nil {
		return nil, aerr
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
	owners := r.form.list("Owner")
	ownedByUs := len(owners) == 0 || contains(owners, "self") || contains(owners, s.cfg.AccountID)
	page, next, aerr := selection{
		param:    "SnapshotId",
		check:    func(ids []string) *apiError { return checkIDs(ids, "snap", "InvalidSnapshotID.Malformed") },
		exists:   func(id string) bool { return s.st.Snapshots[id] != nil },
		notFound: errSnapshotNotFound,
		all: func() []string {
			if !ownedByUs {
				return nil
			}
			return mapKeys(s.st.Snapshots)
		},
		values: func(id, name string) ([]string, bool) { return s.snapshotFilterValues(s.st.Snapshots[id], name, r.now) },
	}.page(r, 5, 1000)
	if aerr != nil {
		return nil, aerr
	}
	out := &describeSnapshotsResponse{NextToken: next}
	for _, id := range page {
		out.Snapshots = append(out.Snapshots, s.snapshotXML(s.st.Snapshots[id], r.now))
	}
	return out, nil
}

func (s *Server) snapshotFilterValues(sn *snapshot, name string, now time.Time) ([]string, bool) {
	switch name {
	case "snapshot-id":
		return []string{sn.ID}, true
	case "volume-id":
		return []string{sn.VolumeID}, true
	case "status":
		return []string{sn.status(now)}, true
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
		return []string{snapshotProgress(sn, now)}, true
	}
	return tagFilterValues(sn.Tags, name)
}

func (s *Server) deleteSnapshot(r *request) (any, *apiError) {
	id := r.form.str("SnapshotId")
	sn, aerr := s.lookupSnapshot(id, "snapshotId")
	if aerr != nil {
		return nil, aerr
	}
	if sn.Lock != nil && sn.Lock.state(r.now) != "expired" {
		return nil, errSnapshotLocked(id, sn.Lock)
	}
	if aerr := r.stopIfDryRun(); aerr != nil {
		return nil, aerr
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
	if aerr := r.stopIfDryRun(); aerr != nil {
		return nil, aerr
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
