package driver

import (
	"context"
	"maps"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/klog/v2"

	"github.com/stowage-csi/stowage/ebs-plugin/internal/cloud"
	"github.com/stowage-csi/stowage/ebs-plugin/internal/params"
)

const (
	gib               = int64(1) << 30
	defaultVolumeSize = 100 * gib
)

// CreateVolume implements csi.ControllerServer. The EC2 ClientToken derived from the name makes a repeated
// request find the volume the first one created, so there is no lookup by name first.
func (d *Driver) CreateVolume(ctx context.Context, req *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	name := req.GetName()
	if name == "" {
		return nil, status.Error(codes.InvalidArgument, "name is required")
	}
	block, multiAttach, err := checkCapabilities(req.GetVolumeCapabilities())
	if err != nil {
		return nil, err
	}
	size, err := volumeSize(req.GetCapacityRange())
	if err != nil {
		return nil, err
	}
	vp, err := createParams(ctx, req, block)
	if err != nil {
		return nil, err
	}
	if multiAttach && vp.VolumeType != params.VolumeTypeIO2 {
		return nil, status.Errorf(codes.InvalidArgument, "MULTI_NODE_MULTI_WRITER needs type io2, got %q", vp.VolumeType)
	}
	tags, err := d.volumeTags(ctx, name, vp)
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "parameters: %v", err)
	}
	zone, zoneID, err := d.pickZone(ctx, req.GetAccessibilityRequirements())
	if err != nil {
		return nil, err
	}
	outpost, err := outpostARN(req.GetAccessibilityRequirements())
	if err != nil {
		return nil, err
	}
	opts := cloud.DiskOptions{
		CapacityBytes:            size,
		VolumeType:               vp.VolumeType,
		IOPS:                     vp.IOPS,
		IOPSPerGB:                vp.IOPSPerGB,
		AllowIOPSPerGBIncrease:   vp.AllowIOPSPerGBIncrease,
		Throughput:               vp.Throughput,
		Encrypted:                vp.Encrypted,
		KMSKeyID:                 vp.KMSKeyID,
		AvailabilityZone:         zone,
		AvailabilityZoneID:       zoneID,
		OutpostARN:               outpost,
		MultiAttach:              multiAttach,
		VolumeInitializationRate: vp.VolumeInitializationRate,
		Tags:                     tags,
	}
	if err := d.applyContentSource(ctx, req.GetVolumeContentSource(), req.GetAccessibilityRequirements(), &opts); err != nil {
		return nil, err
	}

	release, ok := d.inFlight.Insert("create/" + name)
	if !ok {
		return nil, aborted("volume " + name)
	}
	defer release()
	disk, err := d.cloud.CreateDisk(ctx, name, opts)
	if err != nil {
		return nil, cloudError(err, "create volume %q", name)
	}
	if got := int64(disk.CapacityGiB) * gib; got < size {
		// Only possible when a ClientToken matched a volume made with other parameters, which EC2 refuses;
		// checked anyway because a too-small volume would be a silent data-loss risk.
		return nil, status.Errorf(codes.AlreadyExists, "volume %q exists as %s with %d GiB, smaller than requested", name, disk.VolumeID, disk.CapacityGiB)
	}
	return &csi.CreateVolumeResponse{Volume: d.csiVolume(disk, vp, req.GetVolumeContentSource())}, nil
}

func volumeSize(r *csi.CapacityRange) (int64, error) {
	req, lim := r.GetRequiredBytes(), r.GetLimitBytes()
	if req < 0 || lim < 0 {
		return 0, status.Errorf(codes.InvalidArgument, "capacity_range: required_bytes %d and limit_bytes %d must not be negative", req, lim)
	}
	if lim > 0 && req > lim {
		return 0, status.Errorf(codes.OutOfRange, "capacity_range: required_bytes %d exceeds limit_bytes %d", req, lim)
	}
	size := req
	if size == 0 {
		size = defaultVolumeSize
		if lim > 0 && lim < size {
			size = lim / gib * gib
		}
	}
	size = cloud.RoundUpGiB(size) * gib
	if lim > 0 && size > lim {
		return 0, status.Errorf(codes.OutOfRange, "capacity_range: %d bytes rounded up to whole GiB (%d) exceeds limit_bytes %d", req, size, lim)
	}
	if size < gib {
		return 0, status.Errorf(codes.OutOfRange, "capacity_range: limit_bytes %d is below the 1 GiB minimum", lim)
	}
	return size, nil
}

// volumeTags builds every tag of a new volume: the class's templates rendered with the volume's data over the
// literal --extra-tags, in upstream's order (params.VolumeTags).
func (d *Driver) volumeTags(ctx context.Context, name string, vp *params.Volume) (map[string]string, error) {
	data := params.VolumeTemplateData{PVCName: vp.PVCName, PVCNamespace: vp.PVCNamespace, PVName: vp.PVName}
	ctx = klog.NewContext(ctx, klog.FromContext(ctx).WithValues("volume", name))
	classTags, err := params.RenderTagsWarnOnly(ctx, vp.TagSpecs, data, d.opts.WarnOnInvalidTag)
	if err != nil {
		return nil, err
	}
	return params.VolumeTags(name, vp, params.TagFlags{ClusterID: d.opts.KubernetesClusterID, Extra: d.opts.ExtraTags}, classTags), nil
}

// pickZone takes the first preferred, then the first requisite topology with a zone; without topology, the
// region's first zone.
func (d *Driver) pickZone(ctx context.Context, tr *csi.TopologyRequirement) (string, string, error) {
	for _, list := range [][]*csi.Topology{tr.GetPreferred(), tr.GetRequisite()} {
		for _, t := range list {
			seg := t.GetSegments()
			if z := seg[ZoneTopologyKey]; z != "" {
				return z, "", nil
			}
			if z := seg[WellKnownZoneTopologyKey]; z != "" {
				return z, "", nil
			}
			if z := seg[ZoneIDTopologyKey]; z != "" {
				return "", z, nil
			}
		}
	}
	zones, err := d.cloud.AvailabilityZones(ctx)
	if err != nil {
		return "", "", cloudError(err, "pick an availability zone")
	}
	if len(zones) == 0 {
		return "", "", status.Error(codes.Internal, "the region has no availability zones")
	}
	return zones[0], "", nil
}

func (d *Driver) applyContentSource(ctx context.Context, src *csi.VolumeContentSource, tr *csi.TopologyRequirement, opts *cloud.DiskOptions) error {
	if src == nil {
		return nil
	}
	switch {
	case src.GetSnapshot() != nil:
		id := src.GetSnapshot().GetSnapshotId()
		if !validSnapshotID(id) {
			return status.Errorf(codes.NotFound, "volume_content_source: snapshot %q does not exist", id)
		}
		snap, err := d.cloud.GetSnapshotByID(ctx, id)
		if err != nil {
			return cloudError(err, "volume_content_source: snapshot %s", id)
		}
		if int64(snap.SizeGiB)*gib > opts.CapacityBytes {
			return status.Errorf(codes.OutOfRange, "capacity %d bytes is smaller than snapshot %s (%d GiB)", opts.CapacityBytes, id, snap.SizeGiB)
		}
		opts.SnapshotID = id
	case src.GetVolume() != nil:
		id := src.GetVolume().GetVolumeId()
		if !validVolumeID(id) {
			return status.Errorf(codes.NotFound, "volume_content_source: volume %q does not exist", id)
		}
		srcDisk, err := d.cloud.GetDisk(ctx, id)
		if err != nil {
			return cloudError(err, "volume_content_source: volume %s", id)
		}
		if int64(srcDisk.CapacityGiB)*gib > opts.CapacityBytes {
			return status.Errorf(codes.OutOfRange, "capacity %d bytes is smaller than source volume %s (%d GiB)", opts.CapacityBytes, id, srcDisk.CapacityGiB)
		}
		if srcDisk.Encrypted && !opts.Encrypted && opts.KMSKeyID == "" {
			opts.Encrypted = true // a copy of an encrypted volume is encrypted with the source's key
		}
		if opts.KMSKeyID != "" && opts.KMSKeyID != srcDisk.KMSKeyID {
			return status.Errorf(codes.InvalidArgument, "kmsKeyId %q differs from source volume %s's key; a clone keeps its source's key", opts.KMSKeyID, id)
		}
		if zones := topologyZones(tr); len(zones) > 0 && !zones[srcDisk.AvailabilityZone] {
			return status.Errorf(codes.InvalidArgument, "clone of %s must be in its zone %s, which the accessibility requirements exclude", id, srcDisk.AvailabilityZone)
		}
		// CopyVolumes takes no Outpost: the copy is where its source is.
		if opts.OutpostARN != "" && opts.OutpostARN != srcDisk.OutpostARN {
			return status.Errorf(codes.InvalidArgument, "clone of %s must be where it is (Outpost %q), not on Outpost %s the accessibility requirements name", id, srcDisk.OutpostARN, opts.OutpostARN)
		}
		opts.OutpostARN = srcDisk.OutpostARN
		opts.AvailabilityZoneID = ""
		opts.SourceVolumeID = id
		opts.AvailabilityZone = srcDisk.AvailabilityZone
	default:
		return status.Error(codes.InvalidArgument, "volume_content_source: neither snapshot nor volume")
	}
	return nil
}

func (d *Driver) csiVolume(disk *cloud.Disk, vp *params.Volume, src *csi.VolumeContentSource) *csi.Volume {
	vctx := vp.Context()
	// The well-known zone key only, as upstream today: a PV's node affinity on the driver's own zone key
	// could not be met by a node that is not up yet (a node autoscaler's template has the well-known labels
	// only), and every node that runs the driver has both.
	seg := map[string]string{WellKnownZoneTopologyKey: disk.AvailabilityZone}
	maps.Copy(seg, outpostSegments(disk.OutpostARN))
	return &csi.Volume{
		VolumeId:           disk.VolumeID,
		CapacityBytes:      int64(disk.CapacityGiB) * gib,
		VolumeContext:      vctx,
		ContentSource:      src,
		AccessibleTopology: []*csi.Topology{{Segments: seg}},
	}
}

// topologyZones lists every zone named in the requirements.
func topologyZones(tr *csi.TopologyRequirement) map[string]bool {
	zones := map[string]bool{}
	for _, list := range [][]*csi.Topology{tr.GetPreferred(), tr.GetRequisite()} {
		for _, t := range list {
			for _, k := range []string{ZoneTopologyKey, WellKnownZoneTopologyKey} {
				if z := t.GetSegments()[k]; z != "" {
					zones[z] = true
				}
			}
		}
	}
	return zones
}

// createParams reads the StorageClass parameters of a CreateVolume request, logging their warnings, with the
// mutable parameters (a VolumeAttributesClass) over them, as the CSI spec says they take precedence.
func createParams(ctx context.Context, req *csi.CreateVolumeRequest, block bool) (*params.Volume, error) {
	// Format options are checked against the filesystem each mount capability names, as upstream does: the
	// provisioner moves the StorageClass's csi.storage.k8s.io/fstype there, and it is what the node formats.
	var fsTypes []string
	for _, c := range req.GetVolumeCapabilities() {
		if fs := c.GetMount().GetFsType(); fs != "" && !block {
			fsTypes = append(fsTypes, fs)
		}
	}
	vp, err := params.ParseVolumeFor(req.GetParameters(), block, fsTypes)
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "parameters: %v", err)
	}
	logger := klog.FromContext(ctx).WithValues("name", req.GetName())
	for _, w := range vp.Warnings {
		logger.Info("StorageClass parameter warning", "warning", w)
	}
	if len(req.GetMutableParameters()) > 0 {
		mp, err := params.ParseModify(req.GetMutableParameters(), true)
		if err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "mutable_parameters: %v", err)
		}
		for _, w := range mp.Warnings {
			logger.Info("VolumeAttributesClass parameter warning", "warning", w)
		}
		if mp.VolumeType != "" {
			vp.VolumeType = mp.VolumeType
		}
		if mp.IOPS > 0 {
			vp.IOPS, vp.IOPSPerGB = mp.IOPS, 0
		}
		if mp.Throughput > 0 {
			vp.Throughput = mp.Throughput
		}
		vp.TagSpecs = append(vp.TagSpecs, mp.TagSpecs...)
	}
	return vp, nil
}
