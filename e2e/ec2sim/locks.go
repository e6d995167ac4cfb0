package ec2sim

import (
	"net/http"
	"time"
)

// snapshotLock is an EBS snapshot lock (LockSnapshot): governance or compliance mode until ExpiresOn, with an
// optional cooling-off period in compliance mode during which it can still be changed or removed.
type snapshotLock struct {
	Mode          string    `json:"mode"`
	CreatedOn     time.Time `json:"createdOn"`
	DurationStart time.Time `json:"durationStart"`
	DurationDays  int64     `json:"durationDays,omitempty"`
	ExpiresOn     time.Time `json:"expiresOn"`
	CoolOffHours  int64     `json:"coolOffHours,omitempty"`
	CoolOffEndsOn time.Time `json:"coolOffEndsOn"`
}

func (l *snapshotLock) state(now time.Time) string {
	switch {
	case !now.Before(l.ExpiresOn):
		return "expired"
	case l.Mode == "compliance" && now.Before(l.CoolOffEndsOn):
		return "compliance-cooloff"
	default:
		return l.Mode
	}
}

// changeable: governance locks and compliance locks in their cooling-off period can be changed or removed.
func (l *snapshotLock) changeable(now time.Time) bool {
	st := l.state(now)
	return st != "compliance"
}

type lockSnapshotResponse struct {
	SnapshotID             string `xml:"snapshotId"`
	LockState              string `xml:"lockState"`
	LockDuration           int64  `xml:"lockDuration,omitempty"`
	CoolOffPeriod          int64  `xml:"coolOffPeriod,omitempty"`
	CoolOffPeriodExpiresOn string `xml:"coolOffPeriodExpiresOn,omitempty"`
	LockCreatedOn          string `xml:"lockCreatedOn"`
	LockExpiresOn          string `xml:"lockExpiresOn"`
	LockDurationStartTime  string `xml:"lockDurationStartTime"`
}

func (s *Server) lockSnapshot(r *request) (any, *apiError) {
	id := r.form.str("SnapshotId")
	sn, aerr := s.lookupSnapshot(id, "snapshotId")
	if aerr != nil {
		return nil, aerr
	}
	lock, aerr := readLock(r.form, r.now)
	if aerr != nil {
		return nil, aerr
	}
	if old := sn.Lock; old != nil && old.state(r.now) != "expired" {
		if !old.changeable(r.now) && (lock.Mode != "compliance" || lock.ExpiresOn.Before(old.ExpiresOn)) {
			return nil, errIncorrectState("Snapshot %s is locked in compliance mode; its lock can only be extended.", id)
		}
		lock.CreatedOn = old.CreatedOn
		if old.state(r.now) == "compliance" {
			// Past its cooling-off period a compliance lock keeps that status.
			lock.CoolOffHours, lock.CoolOffEndsOn = old.CoolOffHours, old.CoolOffEndsOn
		}
	}
	if aerr := r.stopIfDryRun(); aerr != nil {
		return nil, aerr
	}
	sn.Lock = lock
	r.mutated = true
	out := &lockSnapshotResponse{
		SnapshotID: id, LockState: lock.state(r.now), LockDuration: lock.DurationDays, CoolOffPeriod: lock.CoolOffHours,
		LockCreatedOn: ts(lock.CreatedOn), LockExpiresOn: ts(lock.ExpiresOn), LockDurationStartTime: ts(lock.DurationStart),
	}
	if lock.CoolOffHours > 0 {
		out.CoolOffPeriodExpiresOn = ts(lock.CoolOffEndsOn)
	}
	return out, nil
}

// readLock reads a new lock's mode, its end (a duration in days or a date) and, in compliance mode, its
// cooling-off period.
func readLock(f *form, now time.Time) (*snapshotLock, *apiError) {
	mode := f.str("LockMode")
	switch mode {
	case "":
		return nil, errMissing("lockMode")
	case "governance", "compliance":
	default:
		return nil, errBadParam("lockMode", mode)
	}
	days, daysSet, aerr := f.integer("LockDuration")
	if aerr != nil {
		return nil, aerr
	}
	expStr, expSet := f.get("ExpirationDate")
	if daysSet == expSet {
		return nil, errCombination("Specify exactly one of lockDuration and expirationDate.")
	}
	lock := &snapshotLock{Mode: mode, CreatedOn: now, DurationStart: now}
	if daysSet {
		if days < 1 || days > 36500 {
			return nil, errInvalidValue("Value (%d) for parameter lockDuration is invalid. It must be between 1 and 36500 days.", days)
		}
		lock.DurationDays = days
		lock.ExpiresOn = now.Add(time.Duration(days) * 24 * time.Hour)
	} else {
		exp, err := time.Parse(time.RFC3339Nano, expStr)
		if err != nil {
			return nil, errBadParam("expirationDate", expStr)
		}
		if !exp.After(now) {
			return nil, errInvalidValue("The expirationDate must be in the future.")
		}
		lock.ExpiresOn = exp
	}
	hours, hoursSet, aerr := f.integer("CoolOffPeriod")
	if aerr != nil || !hoursSet {
		return lock, aerr
	}
	if mode != "compliance" {
		return nil, errCombination("The parameter coolOffPeriod is supported only in compliance mode.")
	}
	if hours < 1 || hours > 72 {
		return nil, errInvalidValue("Value (%d) for parameter coolOffPeriod is invalid. It must be between 1 and 72 hours.", hours)
	}
	lock.CoolOffHours = hours
	lock.CoolOffEndsOn = now.Add(time.Duration(hours) * time.Hour)
	return lock, nil
}

type unlockSnapshotResponse struct {
	SnapshotID string `xml:"snapshotId"`
}

func (s *Server) unlockSnapshot(r *request) (any, *apiError) {
	id := r.form.str("SnapshotId")
	sn, aerr := s.lookupSnapshot(id, "snapshotId")
	if aerr != nil {
		return nil, aerr
	}
	if sn.Lock == nil || sn.Lock.state(r.now) == "expired" {
		return nil, errIncorrectState("Snapshot %s is not locked.", id)
	}
	if !sn.Lock.changeable(r.now) {
		return nil, errIncorrectState("Snapshot %s is locked in compliance mode after its cooling-off period and can't be unlocked.", id)
	}
	if aerr := r.stopIfDryRun(); aerr != nil {
		return nil, aerr
	}
	sn.Lock = nil
	r.mutated = true
	return &unlockSnapshotResponse{SnapshotID: id}, nil
}

// errSnapshotLocked refuses to delete a locked snapshot.
func errSnapshotLocked(id string, l *snapshotLock) *apiError {
	return newError(http.StatusBadRequest, "SnapshotLocked", "Snapshot %s is locked in %s mode until %s and can't be deleted.", id, l.Mode, ts(l.ExpiresOn))
}
