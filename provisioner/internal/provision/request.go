package provision

import (
	"context"
	"fmt"
	"maps"

	"github.com/container-storage-interface/spec/lib/go/csi"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/klog/v2"
)

// sourceKind says where a new volume's data comes from; the values are upstream's metric label values.
type sourceKind string

const (
	sourceNone     sourceKind = ""
	sourceClone    sourceKind = "PersistentVolumeClaim"
	sourceSnapshot sourceKind = "VolumeSnapshot"
)

// createPlan is everything decided before CreateVolume: the request and what the PV will need from it.
type createPlan struct {
	req       *csi.CreateVolumeRequest
	secrets   [secretKinds]*secretRef
	fsType    string
	block     bool
	source    sourceKind
	attrClass string
	// sourceName is the clone's source PVC or the VolumeSnapshot, in the claim's namespace.
	sourceName string
}

// planCreate builds the CreateVolume request for claim. It writes nothing, so a claim that fails here (bad
// parameters, missing source) costs no API writes; errors that retrying soon will not fix are slow.
func (p *Provisioner) planCreate(ctx context.Context, claim *v1.PersistentVolumeClaim, class *storagev1.StorageClass, volName, selectedNode string) (*createPlan, error) {
	params, err := parseClassParams(class.Parameters)
	if err != nil {
		return nil, slow(err)
	}
	size, ok := claim.Spec.Resources.Requests[v1.ResourceStorage]
	if !ok {
		return nil, slow(fmt.Errorf("claim has no spec.resources.requests.storage"))
	}
	plan := &createPlan{
		block:  claim.Spec.VolumeMode != nil && *claim.Spec.VolumeMode == v1.PersistentVolumeBlock,
		fsType: params.fsType,
	}
	if plan.fsType == "" {
		plan.fsType = p.cfg.DefaultFSType
	}
	caps, err := volumeCapabilities(claim.Spec.AccessModes, plan.block, plan.fsType, class.MountOptions, p.cfg.Capabilities.SingleNodeMultiWriter)
	if err != nil {
		return nil, slow(err)
	}
	for kind, t := range params.secrets {
		if plan.secrets[kind], err = resolveSecret(t, volName, claim); err != nil {
			return nil, slow(err)
		}
	}
	provSecret, err := secretData(ctx, p, plan.secrets[secretProvisioner])
	if err != nil {
		return nil, err
	}

	driverParams := params.driver
	if p.cfg.ExtraCreateMetadata {
		driverParams[metaPVCName] = claim.Name
		driverParams[metaPVCNamespace] = claim.Namespace
		driverParams[metaPVName] = volName
	}
	plan.req = &csi.CreateVolumeRequest{
		Name:               volName,
		CapacityRange:      &csi.CapacityRange{RequiredBytes: size.Value()},
		VolumeCapabilities: caps,
		Parameters:         driverParams,
		Secrets:            provSecret,
	}
	if limit, ok := claim.Spec.Resources.Limits[v1.ResourceStorage]; ok && limit.Value() > 0 {
		plan.req.CapacityRange.LimitBytes = limit.Value()
	}
	if plan.req.AccessibilityRequirements, err = p.accessibility(class, selectedNode, claim.Name); err != nil {
		return nil, err
	}
	if err := p.planAttributesClass(ctx, claim, plan); err != nil {
		return nil, err
	}
	if err := p.planSource(ctx, claim, plan, size.Value()); err != nil {
		return nil, err
	}
	return plan, nil
}

// planAttributesClass passes a VolumeAttributesClass's parameters as mutable_parameters.
func (p *Provisioner) planAttributesClass(ctx context.Context, claim *v1.PersistentVolumeClaim, plan *createPlan) error {
	name := claim.Spec.VolumeAttributesClassName
	if name == nil || *name == "" {
		return nil
	}
	if p.cfg.AttrClassesIgnored {
		// Upstream reads the field only with the gate on; with it off the claim provisions as if it named no
		// class (and the driver's MODIFY_VOLUME is not required). Logged, so the lost parameters can be traced.
		klog.FromContext(ctx).V(2).Info("VolumeAttributesClass feature gate is off: ignoring the claim's spec.volumeAttributesClassName", "volumeAttributesClass", *name)
		return nil
	}
	if p.attrClasses == nil {
		return slow(fmt.Errorf("claim names VolumeAttributesClass %q, but the cluster serves no storage.k8s.io/v1 VolumeAttributesClass API", *name))
	}
	if !p.cfg.Capabilities.ModifyVolume {
		return slow(fmt.Errorf("claim names VolumeAttributesClass %q, but driver %s lacks the MODIFY_VOLUME capability", *name, p.cfg.DriverName))
	}
	vac, err := p.attrClasses.Get(ctx, *name)
	if err != nil {
		return fmt.Errorf("get VolumeAttributesClass %q: %w", *name, err)
	}
	if vac.DriverName != p.cfg.DriverName {
		return slow(fmt.Errorf("VolumeAttributesClass %q is for driver %s, not %s", *name, vac.DriverName, p.cfg.DriverName))
	}
	plan.req.MutableParameters = maps.Clone(vac.Parameters) // the cached class is shared between workers
	plan.attrClass = *name
	return nil
}

// volumeCapabilities maps access modes and volume mode to CSI capabilities, one per access mode.
// ReadWriteOncePod becomes SINGLE_NODE_SINGLE_WRITER (and ReadWriteOnce SINGLE_NODE_MULTI_WRITER) only when the
// driver has SINGLE_NODE_MULTI_WRITER; otherwise both are SINGLE_NODE_WRITER, the one single-node mode every
// driver understands, as upstream does.
func volumeCapabilities(modes []v1.PersistentVolumeAccessMode, block bool, fsType string, mountOptions []string, singleNodeMultiWriter bool) ([]*csi.VolumeCapability, error) {
	if len(modes) == 0 {
		return nil, fmt.Errorf("claim has no spec.accessModes")
	}
	var out []*csi.VolumeCapability
	for _, m := range modes {
		if m == v1.ReadWriteOncePod && len(modes) > 1 {
			return nil, fmt.Errorf("spec.accessModes: ReadWriteOncePod cannot be combined with other access modes")
		}
		var mode csi.VolumeCapability_AccessMode_Mode
		switch m {
		case v1.ReadWriteOnce:
			mode = csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER
			if singleNodeMultiWriter {
				mode = csi.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER
			}
		case v1.ReadWriteOncePod:
			mode = csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER
			if singleNodeMultiWriter {
				mode = csi.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER
			}
		case v1.ReadOnlyMany:
			mode = csi.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY
		case v1.ReadWriteMany:
			mode = csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER
		default:
			return nil, fmt.Errorf("spec.accessModes: unknown access mode %q", m)
		}
		c := &csi.VolumeCapability{AccessMode: &csi.VolumeCapability_AccessMode{Mode: mode}}
		if block {
			c.AccessType = &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}}
		} else {
			c.AccessType = &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{FsType: fsType, MountFlags: mountOptions}}
		}
		out = append(out, c)
	}
	return out, nil
}
