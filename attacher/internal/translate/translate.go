// Package translate turns a PersistentVolumeSpec that names an in-tree volume plugin (for example
// kubernetes.io/aws-ebs) into the equivalent CSI spec, so the attacher can serve VolumeAttachments that
// kube-controller-manager created for migrated in-tree volumes.
package translate

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	csitrans "k8s.io/csi-translation-lib"
	"k8s.io/klog/v2"
)

// Translator migrates in-tree volume specs to one CSI driver.
type Translator struct {
	driver string
	lib    csitrans.CSITranslator
}

// New returns a Translator for the CSI driver named driver.
func New(driver string) *Translator {
	return &Translator{driver: driver, lib: csitrans.New()}
}

// ToCSI returns a spec with a CSI source and whether it was translated from an in-tree source.
// A spec that already has a CSI source is returned as it is; an in-tree spec is translated when its
// plugin migrates to this driver; anything else is an error naming the volume.
func (t *Translator) ToCSI(logger klog.Logger, name string, spec *v1.PersistentVolumeSpec) (*v1.PersistentVolumeSpec, bool, error) {
	if spec == nil {
		return nil, false, fmt.Errorf("volume %q has no spec", name)
	}
	if spec.CSI != nil {
		return spec, false, nil
	}
	pv := &v1.PersistentVolume{Spec: *spec}
	pv.Name = name
	if !t.lib.IsPVMigratable(pv) {
		return nil, false, fmt.Errorf("volume %q has neither spec.csi nor an in-tree source that migrates to CSI", name)
	}
	plugin, err := t.lib.GetInTreePluginNameFromSpec(pv, nil)
	if err != nil {
		return nil, false, fmt.Errorf("volume %q: %w", name, err)
	}
	target, err := t.lib.GetCSINameFromInTreeName(plugin)
	if err != nil {
		return nil, false, fmt.Errorf("volume %q: %w", name, err)
	}
	if target != t.driver {
		return nil, false, fmt.Errorf("volume %q uses in-tree plugin %s, which migrates to %s, not %s", name, plugin, target, t.driver)
	}
	translated, err := t.lib.TranslateInTreePVToCSI(logger, pv)
	if err != nil {
		return nil, false, fmt.Errorf("translating in-tree volume %q to CSI: %w", name, err)
	}
	if translated.Spec.CSI == nil {
		return nil, false, fmt.Errorf("translating in-tree volume %q to CSI gave no spec.csi", name)
	}
	return &translated.Spec, true, nil
}

// RepairVolumeHandle lets the in-tree plugin's translation fix a migrated volume handle that depends on
// the node (GCE PD zones, for example); drivers without such a rule get the handle back unchanged.
func (t *Translator) RepairVolumeHandle(handle, nodeID string) (string, error) {
	repaired, err := t.lib.RepairVolumeHandle(t.driver, handle, nodeID)
	if err != nil {
		return "", fmt.Errorf("repairing migrated volume handle %q: %w", handle, err)
	}
	return repaired, nil
}
