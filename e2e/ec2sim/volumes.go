package ec2sim

import (
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"
)

// volumeXML renders a volume as EC2 describes it at now. The answer is encoded after the lock is released, so it
// holds copies, never pointers into the state the ticker goes on changing.
func (s *Server) volumeXML(v *volume, now time.Time) xVolume {
	x := xVolume{
		VolumeID:           v.ID,
		Size:               v.Size,
		SnapshotID:         v.SnapshotID,
		AvailabilityZone:   v.Zone,
		AvailabilityZoneID: s.zoneID(v.Zone),
		Status:             v.status(now),
		CreateTime:         ts(v.CreateTime),
		Tags:               xTags(v.Tags),
		VolumeType:         v.Type,
		Encrypted:          v.Encrypted,
		KmsKeyID:           v.KmsKeyID,
		MultiAttachEnabled: v.MultiAttach,
		OutpostArn:         v.OutpostArn,
		SourceVolumeID:     v.SourceVolumeID,
	}
	if reportsIops(v.Type) {
		x.Iops = ptr(v.Iops)
	}
	if reportsThroughput(v.Type) {
		x.Throughput = ptr(v.Throughput)
	}
	if sn, ok := s.st.Snapshots[v.SnapshotID]; ok && sn.FastRestore[v.Zone] {
		x.FastRestored = true
	}
	for _, a := range v.Attachments {
		x.Attachments = append(x.Attachments, attachmentXML(v.ID, a))
	}
	return x
}

func ptr[T any](v T) *T { return &v }

// copyPtr is a pointer to a copy of *p, or nil.
func copyPtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	return ptr(*p)
}

func attachmentXML(volID string, a *attachment) xAttachment {
	return xAttachment{
		VolumeID:   volID,
		InstanceID: a.InstanceID,
		Device:     a.Device,
		Status:     a.status(),
		AttachTime: ts(a.AttachTime),
		// EC2 keeps delete-on-termination false for volumes attached after launch.
		DeleteOnTermination: false,
		EbsCardIndex:        copyPtr(a.CardIndex),
	}
}

// readSpec reads the fields a new volume's configuration is made of.
func readSpec(f *form) (volumeSpec, *apiError) {
	var sp volumeSpec
	var aerr *apiError
	sp.Type = f.str("VolumeType")
	if sp.Size, _, aerr = f.integer("Size"); aerr != nil {
		return sp, aerr
	}
	if sp.Iops, sp.IopsSet, aerr = f.integer("Iops"); aerr != nil {
		return sp, aerr
	}
	if sp.Throughput, sp.TputSet, aerr = f.integer("Throughput"); aerr != nil {
		return sp, aerr
	}
	if sp.MultiAttach, aerr = f.boolean("MultiAttachEnabled"); aerr != nil {
		return sp, aerr
	}
	return sp, nil
}

// tokenParams is the canonical form of a request, compared when a ClientToken is reused. EC2 compares the
// parameters, not the order they came in: tags are a set, and so is the list of tag specifications, so a
// retry that sends the same tags in another order (a map iterated anew) is the same request.
func tokenParams(f *form) string {
	var plain []string
	specs := map[string]*tagSpec{}
	for k, v := range f.values {
		switch k {
		case "Action", "Version", "ClientToken", "DryRun":
			continue
		}
		if idx, field, ok := tagSpecField(k); ok {
			sp := specs[idx]
			if sp == nil {
				sp = &tagSpec{keys: map[string]string{}, values: map[string]string{}}
				specs[idx] = sp
			}
			switch {
			case field == "ResourceType":
				sp.resourceType = v
			case strings.HasSuffix(field, ".Key"):
				sp.keys[strings.TrimSuffix(field, ".Key")] = v
			case strings.HasSuffix(field, ".Value"):
				sp.values[strings.TrimSuffix(field, ".Value")] = v
			default:
				plain = append(plain, k+"="+v)
			}
			continue
		}
		plain = append(plain, k+"="+v)
	}
	sort.Strings(plain)
	canonSpecs := make([]string, 0, len(specs))
	for _, sp := range specs {
		canonSpecs = append(canonSpecs, sp.canonical())
	}
	sort.Strings(canonSpecs)
	return strings.Join(plain, "\n") + "\n" + strings.Join(canonSpecs, "\n")
}

// tagSpec is one TagSpecification.N of a request: its resource type and tags by their index N.
type tagSpec struct {
	resourceType string
	keys, values map[string]string
}

// canonical is the spec with its tags as a sorted set of key=value pairs.
func (sp *tagSpec) canonical() string {
	pairs := make([]string, 0, len(sp.keys))
	for i, k := range sp.keys {
		pairs = append(pairs, k+"="+sp.values[i])
	}
	sort.Strings(pairs)
	return "TagSpecification(" + sp.resourceType + "){" + strings.Join(pairs, ",") + "}"
}

// tagSpecField splits "TagSpecification.N.Rest" into N and Rest ("ResourceType", "Tag.M.Key", ...).
func tagSpecField(key string) (idx, field string, ok bool) {
	rest, ok := strings.CutPrefix(key, "TagSpecification.")
	if !ok {
		return "", "", false
	}
	idx, field, ok = strings.Cut(rest, ".")
	if !ok {
		return "", "", false
	}
	if field == "ResourceType" {
		return idx, field, true
	}
	if t, ok := strings.CutPrefix(field, "Tag."); ok {
		return idx, t, true
	}
	return idx, field, true
}

// checkToken implements ClientToken idempotency: the same token with the same parameters answers the
// original resource, different parameters are a mismatch.
func (s *Server) checkToken(f *form) (existing string, aerr *apiError) {
	tok := f.str("ClientToken")
	if tok == "" {
		return "", nil
	}
	if len(tok) > 64 {
		return "", errInvalidValue("Value (%s) for parameter clientToken is invalid. The client token must be at most 64 characters.", tok)
	}
	prev, ok := s.st.Tokens[tok]
	if !ok {
		return "", nil
	}
	if prev.Params != tokenParams(f) {
		return "", newError(http.StatusBadRequest, "IdempotentParameterMismatch", "The client token you have provided is associated with a resource that has different parameters. Please use a different client token.")
	}
	if _, ok := s.st.Volumes[prev.ResourceID]; !ok {
		return "", newError(http.StatusBadRequest, "IdempotentParameterMismatch", "The client token you have provided is associated with a resource that is already deleted. Please use a different client token.")
	}
	return prev.ResourceID, nil
}

// createVolume goes in EC2's order: the configuration, its source snapshot and options, then DryRun, the
// ClientToken and the quota, and last the volume and its file.
func (s *Server) createVolume(r *request) (any, *apiError) {
	sp, aerr := readSpec(r.form)
	if aerr != nil {
		return nil, aerr
	}
	if sp.Type == "" {
		sp.Type = "gp2"
	}
	zone, aerr := s.readZone(r.form)
	if aerr != nil {
		return nil, aerr
	}
	src, aerr := s.readSourceSnapshot(r, &sp)
	if aerr != nil {
		return nil, aerr
	}
	iops, tput, aerr := sp.resolve()
	if aerr != nil {
		return nil, aerr
	}
	opts, aerr := s.readCreateOptions(r.form, src)
	if aerr != nil {
		return nil, aerr
	}
	tags, prev, aerr := s.beginNewVolume(r)
	if aerr != nil {
		return nil, aerr
	}
	if prev != nil {
		x := s.volumeXML(prev, r.now)
		return &x, nil
	}
	if aerr := s.checkVolumeQuota(sp.Type, sp.Size); aerr != nil {
		return nil, aerr
	}
	v := &volume{
		ID: newID("vol"), Zone: zone, Type: sp.Type, Size: sp.Size, Iops: iops, Throughput: tput,
		Encrypted: opts.encrypted, KmsKeyID: opts.kms, MultiAttach: sp.MultiAttach, OutpostArn: opts.outpost, Tags: tags,
		CreateTime: r.now, ReadyAt: r.now.Add(s.scaled(jitter(createMin, createMax))),
	}
	v.InitializedAt = v.ReadyAt
	if aerr := s.makeVolumeFile(v, src); aerr != nil {
		return nil, aerr
	}
	s.addVolume(r, v)
	x := s.volumeXML(v, r.now)
	return &x, nil
}

// readSourceSnapshot reads SnapshotId, if set: the snapshot must be completed, and the volume's size defaults to
// the snapshot's and may not be smaller. Without a snapshot the size is required.
func (s *Server) readSourceSnapshot(r *request, sp *volumeSpec) (*snapshot, *apiError) {
	_, sizeSet, _ := r.form.integer("Size")
	id := r.form.str("SnapshotId")
	if id == "" {
		if !sizeSet {
			return nil, errMissing("size")
		}
		return nil, nil
	}
	src, aerr := s.lookupSnapshot(id, "snapshotId")
	if aerr != nil {
		return nil, aerr
	}
	if st := src.status(r.now); st != "completed" {
		return nil, errIncorrectState("Snapshot is in invalid state - %s", st)
	}
	if !sizeSet {
		sp.Size = src.VolumeSize
	} else if sp.Size < src.VolumeSize {
		return nil, errInvalidValue("Volume of %dGiB is smaller than snapshot '%s', expect size >= %dGiB", sp.Size, id, src.VolumeSize)
	}
	return src, nil
}

// createOptions are a new volume's settings beyond its configuration.
type createOptions struct {
	encrypted    bool
	kms, outpost string
}

// readCreateOptions reads encryption (inherited from an encrypted source snapshot), the Outpost and the
// initialization rate, which only a volume restored from a snapshot may have.
func (s *Server) readCreateOptions(f *form, src *snapshot) (createOptions, *apiError) {
	var o createOptions
	var aerr *apiError
	if o.encrypted, aerr = f.boolean("Encrypted"); aerr != nil {
		return o, aerr
	}
	o.kms = f.str("KmsKeyId")
	if o.kms != "" && !o.encrypted {
		return o, newError(http.StatusBadRequest, "InvalidParameterDependency", "The parameter KmsKeyId requires the parameter Encrypted to be set.")
	}
	if src != nil {
		o.encrypted, o.kms = s.encryption(o.encrypted, o.kms, src.Encrypted, src.KmsKeyID)
	} else {
		o.encrypted, o.kms = s.encryption(o.encrypted, o.kms, false, "")
	}
	o.outpost = f.str("OutpostArn")
	if o.outpost != "" && !strings.HasPrefix(o.outpost, "arn:aws:outposts:") {
		return o, errInvalidValue("Value (%s) for parameter outpostArn is invalid.", o.outpost)
	}
	rate, set, aerr := f.integer("VolumeInitializationRate")
	if aerr != nil || !set {
		return o, aerr
	}
	if src == nil {
		return o, errCombination("The parameter volumeInitializationRate requires the parameter snapshotId.")
	}
	if rate < 100 || rate > 300 {
		return o, errInvalidValue("Volume initialization rate of %d MiB/s is invalid; it must be between 100 and 300 MiB/s.", rate)
	}
	return o, nil
}

// makeVolumeFile creates the new volume's sparse file, a copy of the snapshot's when it has one, which then
// also sets when the restored volume is fully initialized.
func (s *Server) makeVolumeFile(v *volume, src *snapshot) *apiError {
	var err error
	if src != nil {
		v.SnapshotID = src.ID
		v.InitializedAt = v.ReadyAt.Add(s.scaled(initBase + time.Duration(v.Size)*initPerGiB))
		err = copySparse(s.snapshotPath(src.ID), s.volumePath(v.ID), v.Size<<30)
	} else {
		err = resizeFile(s.volumePath(v.ID), v.Size<<30)
	}
	if err != nil {
		s.log.Error(err, "Creating volume file", "volume", v.ID)
		return errInternal()
	}
	return nil
}

// encryption settles a new volume's encryption: one made from an encrypted source is encrypted, with the source's key
// unless one is given, and an encrypted volume without a key gets the account's default key.
func (s *Server) encryption(encrypted bool, kms string, srcEncrypted bool, srcKMS string) (bool, string) {
	if srcEncrypted {
		encrypted = true
		if kms == "" {
			kms = srcKMS
		}
	}
	if encrypted && kms == "" {
		kms = s.defaultKMSKey()
	}
	return encrypted, kms
}

// beginNewVolume does the last steps before a volume is made: it reads the new volume's tags, stops a dry run,
// and finds the volume an earlier request with the same ClientToken made (nil if there is none).
func (s *Server) beginNewVolume(r *request) ([]tag, *volume, *apiError) {
	tags, aerr := r.form.tagSpecs("volume")
	if aerr != nil {
		return nil, nil, aerr
	}
	if aerr := r.stopIfDryRun(); aerr != nil {
		return nil, nil, aerr
	}
	id, aerr := s.checkToken(r.form)
	if aerr != nil {
		return nil, nil, aerr
	}
	if id == "" {
		return tags, nil, nil
	}
	return tags, s.st.Volumes[id], nil
}

// addVolume stores a new volume and, when the request carries a ClientToken, remembers it for idempotency.
func (s *Server) addVolume(r *request, v *volume) {
	s.st.Volumes[v.ID] = v
	if tok := r.form.str("ClientToken"); tok != "" {
		s.st.Tokens[tok] = clientToken{ResourceID: v.ID, Params: tokenParams(r.form)}
	}
	r.mutated = true
}

func (s *Server) defaultKMSKey() string {
	return fmt.Sprintf("arn:aws:kms:%s:%s:key/00000000-0000-4000-8000-000000000ebs", s.cfg.Region, s.cfg.AccountID)
}

// readZone reads AvailabilityZone or AvailabilityZoneId (exactly one).
func (s *Server) readZone(f *form) (string, *apiError) {
	zone, zoneID := f.str("AvailabilityZone"), f.str("AvailabilityZoneId")
	switch {
	case zone != "" && zoneID != "":
		return "", errCombination("Only one of availabilityZone or availabilityZoneId can be specified.")
	case zone != "":
		if !s.validZone(zone) {
			return "", errInvalidValue("Invalid availability zone: [%s]", zone)
		}
		return zone, nil
	case zoneID != "":
		z, ok := s.zoneByID(zoneID)
		if !ok {
			return "", errInvalidValue("Invalid availability zone ID: [%s]", zoneID)
		}
		return z, nil
	}
	return "", errMissing("availabilityZone")
}

type copyVolumesResponse struct {
	Volumes []xVolume `xml:"volumeSet>item"`
}

func (s *Server) copyVolumes(r *request) (any, *apiError) {
	f := r.form
	srcID := f.str("SourceVolumeId")
	src, aerr := s.lookupReadyVolume(srcID, "sourceVolumeId", r.now)
	if aerr != nil {
		return nil, aerr
	}
	sp, aerr := readSpec(f)
	if aerr != nil {
		return nil, aerr
	}
	_, sizeSet, _ := f.integer("Size")
	if !sizeSet {
		sp.Size = src.Size
	} else if sp.Size < src.Size {
		return nil, errInvalidValue("Volume of %dGiB is smaller than source volume '%s', expect size >= %dGiB", sp.Size, srcID, src.Size)
	}
	if sp.Type == "" {
		sp.Type = src.Type
		if !sp.IopsSet && volumeTypes[src.Type].iopsPerGiB > 0 {
			sp.Iops, sp.IopsSet = src.Iops, true
		}
		if !sp.TputSet && reportsThroughput(src.Type) {
			sp.Throughput, sp.TputSet = src.Throughput, true
		}
	}
	iops, tput, aerr := sp.resolve()
	if aerr != nil {
		return nil, aerr
	}
	encrypted, aerr := f.boolean("Encrypted")
	if aerr != nil {
		return nil, aerr
	}
	kms := f.str("KmsKeyId")
	if src.Encrypted {
		if _, set := f.get("Encrypted"); set && !encrypted {
			return nil, errCombination("A copy of an encrypted volume must be encrypted.")
		}
	}
	encrypted, kms = s.encryption(encrypted, kms, src.Encrypted, src.KmsKeyID)
	tags, prev, aerr := s.beginNewVolume(r)
	if aerr != nil {
		return nil, aerr
	}
	if prev != nil {
		return &copyVolumesResponse{Volumes: []xVolume{s.volumeXML(prev, r.now)}}, nil
	}
	if aerr := s.checkVolumeQuota(sp.Type, sp.Size); aerr != nil {
		return nil, aerr
	}
	v := &volume{
		ID: newID("vol"), Zone: src.Zone, Type: sp.Type, Size: sp.Size, Iops: iops, Throughput: tput,
		Encrypted: encrypted, KmsKeyID: kms, MultiAttach: sp.MultiAttach, OutpostArn: src.OutpostArn, Tags: tags,
		SourceVolumeID: src.ID, CreateTime: r.now, ReadyAt: r.now.Add(s.scaled(jitter(createMin, createMax))),
	}
	v.InitializedAt = v.ReadyAt
	if err := copySparse(s.volumePath(src.ID), s.volumePath(v.ID), v.Size<<30); err != nil {
		s.log.Error(err, "Copying volume file", "source", src.ID, "volume", v.ID)
		return nil, errInternal()
	}
	s.addVolume(r, v)
	return &copyVolumesResponse{Volumes: []xVolume{s.volumeXML(v, r.now)}}, nil
}

func (s *Server) deleteVolume(r *request) (any, *apiError) {
	id := r.form.str("VolumeId")
	v, aerr := s.lookupVolume(id, "volumeId")
	if aerr != nil {
		return nil, aerr
	}
	if len(v.Attachments) > 0 {
		return nil, newError(http.StatusBadRequest, "VolumeInUse", "Volume %s is currently attached to %s", id, v.Attachments[0].InstanceID)
	}
	if aerr := r.stopIfDryRun(); aerr != nil {
		return nil, aerr
	}
	if err := removeFile(s.volumePath(id)); err != nil {
		s.log.Error(err, "Removing volume file", "volume", id)
	}
	delete(s.st.Volumes, id)
	r.mutated = true
	return &returnTrue{Return: true}, nil
}
