package ec2sim

import "time"

// Delays at time scale 1, after EC2's observed behaviour (creation median ~1.5 s, attach/detach 1-4 s).
const (
	createMin, createMax = 1 * time.Second, 3 * time.Second
	attachMin, attachMax = 2 * time.Second, 4 * time.Second
	detachMin, detachMax = 1 * time.Second, 3 * time.Second
	modifyingDelay       = 3 * time.Second
	optimizingBase       = 10 * time.Second
	optimizingPerGiB     = 20 * time.Millisecond
	snapshotBase         = 3 * time.Second
	snapshotPerGiB       = 100 * time.Millisecond
	initBase             = 5 * time.Second
	initPerGiB           = 50 * time.Millisecond
)

func (v *volume) status(now time.Time) string {
	switch {
	case now.Before(v.ReadyAt):
		return "creating"
	case len(v.Attachments) > 0:
		return "in-use"
	default:
		return "available"
	}
}

func (a *attachment) status() string {
	switch {
	case !a.DetachAt.IsZero():
		return "detaching"
	case a.Attached:
		return "attached"
	default:
		return "attaching"
	}
}

func (m *modification) state(now time.Time) string {
	switch {
	case now.Before(m.OptimizingAt):
		return "modifying"
	case now.Before(m.CompletedAt):
		return "optimizing"
	default:
		return "completed"
	}
}

// progress runs 0-100 over the whole modification.
func (m *modification) progress(now time.Time) int64 {
	return progressBetween(m.StartTime, m.CompletedAt, now)
}

func (sn *snapshot) status(now time.Time) string {
	if now.Before(sn.CompleteAt) {
		return "pending"
	}
	return "completed"
}

func progressBetween(start, end, now time.Time) int64 {
	if !now.Before(end) {
		return 100
	}
	total := end.Sub(start)
	if total <= 0 {
		return 100
	}
	p := int64(100 * now.Sub(start) / total)
	return max(0, min(99, p))
}

// settle carries out the transitions due by now that change stored state or have side effects: finished
// detaches disappear, finished attaches get their loop device, modifications reaching `optimizing` resize the
// volume. It reports whether the state changed. Called with s.mu held.
func (s *Server) settle(now time.Time) bool {
	changed := false
	for _, v := range s.st.Volumes {
		kept := v.Attachments[:0]
		for _, a := range v.Attachments {
			local := s.instances[a.InstanceID].Local
			if !a.DetachAt.IsZero() {
				if now.Before(a.DetachAt) {
					kept = append(kept, a)
					continue
				}
				if local {
					if err := s.loops.release(v.ID, a.InstanceID); err != nil {
						// Keep it detaching until the device is gone, so a reader never sees a stale device.
						s.log.Error(err, "Detaching loop device", "volume", v.ID, "instance", a.InstanceID)
						kept = append(kept, a)
						continue
					}
				}
				changed = true
				continue
			}
			kept = append(kept, a)
			if a.Stuck || now.Before(a.ReadyAt) {
				continue
			}
			if local {
				if err := s.loops.ensure(v.ID, a.InstanceID, s.volumePath(v.ID)); err != nil {
					s.log.Error(err, "Attaching loop device", "volume", v.ID, "instance", a.InstanceID)
					continue
				}
			}
			if !a.Attached {
				a.Attached = true
				changed = true
			}
		}
		for i := len(kept); i < len(v.Attachments); i++ {
			v.Attachments[i] = nil
		}
		v.Attachments = kept
		if n := len(v.Modifications); n > 0 {
			m := v.Modifications[n-1]
			if !m.Applied && !now.Before(m.OptimizingAt) {
				s.applyModification(v, m)
				changed = true
			}
		}
	}
	return changed
}

// applyModification makes the target configuration the volume's, growing its file and any loop device.
func (s *Server) applyModification(v *volume, m *modification) {
	m.Applied = true
	grown := m.TargetSize > v.Size
	v.Size, v.Type, v.Iops, v.Throughput, v.MultiAttach = m.TargetSize, m.TargetType, m.TargetIops, m.TargetThroughput, m.TargetMultiAttach
	if !grown {
		return
	}
	if err := resizeFile(s.volumePath(v.ID), v.Size<<30); err != nil {
		s.log.Error(err, "Growing volume file", "volume", v.ID)
		return
	}
	if err := s.loops.grow(v.ID); err != nil {
		s.log.Error(err, "Growing loop device", "volume", v.ID)
	}
}
