package ec2sim

import (
	"net/http"
	"regexp"
)

// deviceName holds the names EC2 accepts for EBS attachments on Linux instances.
var deviceName = regexp.MustCompile(`^/dev/(sd[a-z]([1-9]|1[0-5])?|xvd[a-z]{1,2}|hd[a-z])$`)

// rootDevice is the root volume's device on every simulated instance; it is always in use.
const rootDevice = "/dev/xvda"

func (s *Server) readInstanceAndVolume(f *form) (Instance, *volume, *apiError) {
	instID, volID := f.str("InstanceId"), f.str("VolumeId")
	v, aerr := s.lookupVolume(volID, "volumeId")
	if aerr != nil {
		return Instance{}, nil, aerr
	}
	if instID == "" {
		return Instance{}, v, nil
	}
	in, ok := s.instances[instID]
	if !ok {
		return Instance{}, nil, errInstanceNotFound(instID)
	}
	return in, v, nil
}

func (s *Server) attachVolume(r *request) (any, *apiError) {
	f := r.form
	if f.str("InstanceId") == "" {
		return nil, errMissing("instanceId")
	}
	device := f.str("Device")
	if device == "" {
		return nil, errMissing("device")
	}
	in, v, aerr := s.readInstanceAndVolume(f)
	if aerr != nil {
		return nil, aerr
	}
	if !deviceName.MatchString(device) {
		return nil, errInvalidValue("Value (%s) for parameter device is invalid. %s is not a valid EBS device name.", device, device)
	}
	card, cardSet, aerr := f.integer("EbsCardIndex")
	if aerr != nil {
		return nil, aerr
	}
	it := instanceTypes[in.Type]
	if cardSet && (it.maxCards == 0 || card < 0 || card >= it.maxCards) {
		return nil, errInvalidValue("Value (%d) for parameter ebsCardIndex is invalid for instance type %s.", card, in.Type)
	}
	if v.Zone != in.Zone {
		return nil, newError(http.StatusBadRequest, "InvalidVolume.ZoneMismatch", "The volume '%s' is not in the same availability zone as instance '%s'", v.ID, in.ID)
	}
	if aerr := notCreating(v, r.now); aerr != nil {
		return nil, aerr
	}
	if aerr := volumeAttachable(v, in.ID); aerr != nil {
		return nil, aerr
	}
	if aerr := s.deviceFree(in, it, device); aerr != nil {
		return nil, aerr
	}
	if aerr := r.stopIfDryRun(); aerr != nil {
		return nil, aerr
	}
	a := &attachment{
		InstanceID: in.ID,
		Device:     device,
		AttachTime: r.now,
		ReadyAt:    r.now.Add(s.scaled(jitter(attachMin, attachMax))),
		Stuck:      s.faults.stuckAttach(),
	}
	if cardSet {
		a.CardIndex = &card
	}
	v.Attachments = append(v.Attachments, a)
	r.mutated = true
	x := attachmentXML(v.ID, a)
	return &x, nil
}

// volumeAttachable refuses a volume already attached to the instance, or attached elsewhere without
// multi-attach, or attached to as many instances as multi-attach allows.
func volumeAttachable(v *volume, instID string) *apiError {
	for _, a := range v.Attachments {
		if a.InstanceID == instID {
			return newError(http.StatusBadRequest, "VolumeInUse", "%s is already attached to an instance", v.ID)
		}
	}
	if len(v.Attachments) > 0 && !v.MultiAttach {
		return newError(http.StatusBadRequest, "VolumeInUse", "%s is already attached to an instance", v.ID)
	}
	if len(v.Attachments) >= 16 {
		return newError(http.StatusBadRequest, "AttachmentLimitExceeded", "Volume %s is already attached to the maximum of 16 instances.", v.ID)
	}
	return nil
}

// deviceFree refuses a device name the instance already uses (its root device included), and an instance with
// every volume slot of its type taken.
func (s *Server) deviceFree(in Instance, it instanceType, device string) *apiError {
	inUse := errInvalidValue("Invalid value '%s' for unixDevice. Attachment point %s is already in use", device, device)
	used := 0
	for _, other := range s.st.Volumes {
		for _, a := range other.Attachments {
			if a.InstanceID != in.ID {
				continue
			}
			used++
			if a.Device == device {
				return inUse
			}
		}
	}
	if device == rootDevice || device == "/dev/sda1" {
		return inUse
	}
	if int64(used) >= it.volumeSlots() {
		return errAttachmentLimit(in.ID)
	}
	return nil
}

func (s *Server) detachVolume(r *request) (any, *apiError) {
	f := r.form
	in, v, aerr := s.readInstanceAndVolume(f)
	if aerr != nil {
		return nil, aerr
	}
	force, aerr := f.boolean("Force")
	if aerr != nil {
		return nil, aerr
	}
	device := f.str("Device")
	if len(v.Attachments) == 0 {
		return nil, errIncorrectState("Volume '%s' is in the '%s' state.", v.ID, v.status(r.now))
	}
	var a *attachment
	switch {
	case in.ID != "":
		for _, c := range v.Attachments {
			if c.InstanceID == in.ID {
				a = c
			}
		}
	case len(v.Attachments) == 1:
		a = v.Attachments[0]
	default:
		return nil, errMissing("instanceId")
	}
	if a == nil || (device != "" && a.Device != device) {
		return nil, newError(http.StatusBadRequest, "InvalidAttachment.NotFound", "The volume '%s' is not attached to instance '%s'.", v.ID, in.ID)
	}
	if aerr := r.stopIfDryRun(); aerr != nil {
		return nil, aerr
	}
	if a.DetachAt.IsZero() {
		delay := s.scaled(jitter(detachMin, detachMax))
		if force {
			delay /= 2
		}
		a.DetachAt = r.now.Add(delay)
		r.mutated = true
	} else if force && a.DetachAt.After(r.now) {
		// A forced detach of a detach in progress finishes it now.
		a.DetachAt = r.now
		r.mutated = true
	}
	x := attachmentXML(v.ID, a)
	return &x, nil
}

// attachmentsOf lists an instance's attachments for DescribeInstances.
func (s *Server) attachmentsOf(instanceID string) []xAttachment {
	var out []xAttachment
	for _, v := range s.st.Volumes {
		for _, a := range v.Attachments {
			if a.InstanceID == instanceID {
				out = append(out, attachmentXML(v.ID, a))
			}
		}
	}
	return out
}
