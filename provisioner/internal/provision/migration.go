package provision

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	csitrans "k8s.io/csi-translation-lib"
	"k8s.io/klog/v2"
)

// annMigratedTo is what kube-controller-manager's PV controller writes on claims (and PVs) of an in-tree plugin
// whose CSI migration is on: the CSI driver that now serves them.
const annMigratedTo = "pv.kubernetes.io/migrated-to"

// migration lets the provisioner serve the in-tree plugin that migrates to its driver (kubernetes.io/aws-ebs for
// ebs.csi.aws.com), as upstream's csi-provisioner does: kube-controller-manager no longer provisions or deletes
// those volumes itself, it marks the claims and PVs migrated-to the driver and waits for the CSI provisioner.
// Classes keep naming the in-tree provisioner and PVs keep their in-tree source, so a cluster can roll back.
type migration struct {
	inTree string // "" when no in-tree plugin migrates to the driver
	lib    csitrans.CSITranslator
}

func newMigration(driver string) migration {
	lib := csitrans.New()
	m := migration{lib: lib}
	if lib.IsMigratedCSIDriverByName(driver) {
		if name, err := lib.GetInTreeNameFromCSIName(driver); err == nil {
			m.inTree = name
		}
	}
	return m
}

// migratedClaim reports whether kube-controller-manager handed this claim of the in-tree plugin to the driver.
// Upstream takes it when either provisioner annotation names the in-tree plugin or the driver (the PV controller
// writes the driver's name there for migrated claims) and migrated-to names the driver.
func (p *Provisioner) migratedClaim(claim *v1.PersistentVolumeClaim, provisioner string) bool {
	return p.migr.inTree != "" && (provisioner == p.migr.inTree || provisioner == p.cfg.DriverName) &&
		claim.Annotations[annMigratedTo] == p.cfg.DriverName
}

// migrating reports whether class names the in-tree plugin this driver took over. A class translated by csiClass
// still does: translation changes parameters and topology, not the provisioner.
func (p *Provisioner) migrating(class *storagev1.StorageClass) bool {
	return p.migr.inTree != "" && class.Provisioner == p.migr.inTree
}

// csiClass returns the class as the driver sees it: the class itself when it names the driver, the class with its
// in-tree parameters translated (fsType to csi.storage.k8s.io/fstype, zone/zones to allowed topologies, ...) when
// it names the in-tree plugin that migrates to the driver, and nil when it names neither.
func (p *Provisioner) csiClass(ctx context.Context, class *storagev1.StorageClass) (*storagev1.StorageClass, error) {
	switch {
	case class.Provisioner == p.cfg.DriverName:
		return class, nil
	case !p.migrating(class):
		return nil, nil
	}
	translated, err := p.migr.lib.TranslateInTreeStorageClassToCSI(klog.FromContext(ctx), p.migr.inTree, class)
	if err != nil {
		return nil, slow(fmt.Errorf("translating StorageClass %q of in-tree plugin %s to CSI: %w", class.Name, p.migr.inTree, err))
	}
	return translated, nil
}

// inTreePV turns the PV built for a migrated claim back into the in-tree plugin's form, as upstream writes it:
// the in-tree volume source and topology labels, so the PV stays usable after a rollback of the migration.
func (p *Provisioner) inTreePV(pv *v1.PersistentVolume) (*v1.PersistentVolume, error) {
	out, err := p.migr.lib.TranslateCSIPVToInTree(pv)
	if err != nil {
		return nil, fmt.Errorf("translating PV %s to in-tree plugin %s: %w", pv.Name, p.migr.inTree, err)
	}
	return out, nil
}

// migratedPV reports whether pv is an in-tree PV of the plugin that migrates to this driver and was provisioned
// dynamically, by the in-tree plugin or by a CSI provisioner for a migrated claim (upstream's
// isProvisionerForVolume: provisioned-by names the in-tree plugin or the driver, or migrated-to names the driver).
// Static in-tree PVs get no migrated-to from kube-controller-manager and are left alone.
func (p *Provisioner) migratedPV(pv *v1.PersistentVolume) bool {
	if p.migr.inTree == "" || pv.Spec.CSI != nil || !p.migr.lib.IsPVMigratable(pv) {
		return false
	}
	plugin, err := p.migr.lib.GetInTreePluginNameFromSpec(pv, nil)
	if err != nil || plugin != p.migr.inTree {
		return false
	}
	by := pv.Annotations[annProvisionedBy]
	return by == p.migr.inTree || by == p.cfg.DriverName || pv.Annotations[annMigratedTo] == p.cfg.DriverName
}

// volumeHandle is the CSI volume ID of one of our PVs; an in-tree PV's is found by translating it to CSI
// (aws://us-east-1a/vol-0abc becomes vol-0abc).
func (p *Provisioner) volumeHandle(ctx context.Context, pv *v1.PersistentVolume) (string, error) {
	if pv.Spec.CSI != nil {
		return pv.Spec.CSI.VolumeHandle, nil
	}
	csiPV, err := p.migr.lib.TranslateInTreePVToCSI(klog.FromContext(ctx), pv)
	if err != nil {
		return "", fmt.Errorf("translating in-tree PV %s to CSI: %w", pv.Name, err)
	}
	if csiPV.Spec.CSI == nil || csiPV.Spec.CSI.VolumeHandle == "" {
		return "", fmt.Errorf("translating in-tree PV %s to CSI gave no volume handle", pv.Name)
	}
	return csiPV.Spec.CSI.VolumeHandle, nil
}
