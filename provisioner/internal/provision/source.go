package provision

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

const snapshotGroup = "snapshot.storage.k8s.io"

// claimSource describes a claim's data source: a clone, a snapshot, or something an external populator fills.
type claimSource struct {
	kind      sourceKind
	name      string
	populator string // "Kind.group" of a source left to a populator; empty otherwise
	otherNS   string // a cross-namespace dataSourceRef, which is not supported
}

// sourceOf reads dataSourceRef (which the API server mirrors from dataSource for the core kinds), else dataSource.
func sourceOf(claim *v1.PersistentVolumeClaim) claimSource {
	var group, kind, name, ns string
	switch {
	case claim.Spec.DataSourceRef != nil:
		r := claim.Spec.DataSourceRef
		kind, name = r.Kind, r.Name
		if r.APIGroup != nil {
			group = *r.APIGroup
		}
		if r.Namespace != nil && *r.Namespace != claim.Namespace {
			ns = *r.Namespace
		}
	case claim.Spec.DataSource != nil:
		r := claim.Spec.DataSource
		kind, name = r.Kind, r.Name
		if r.APIGroup != nil {
			group = *r.APIGroup
		}
	default:
		return claimSource{}
	}
	switch {
	case group == "" && kind == "PersistentVolumeClaim":
		return claimSource{kind: sourceClone, name: name, otherNS: ns}
	case group == snapshotGroup && kind == "VolumeSnapshot":
		return claimSource{kind: sourceSnapshot, name: name, otherNS: ns}
	}
	return claimSource{populator: kind + "." + group}
}

// planSource adds the content source to the request after checking the source can be used.
func (p *Provisioner) planSource(ctx context.Context, claim *v1.PersistentVolumeClaim, plan *createPlan, size int64) error {
	src := sourceOf(claim)
	plan.source, plan.sourceName = src.kind, src.name
	switch src.kind {
	case sourceClone:
		return p.planClone(claim, plan, size)
	case sourceSnapshot:
		return p.planSnapshot(ctx, claim, plan, size)
	}
	return nil
}

// protectSource puts the source's protection finalizer on it before CreateVolume, so the source cannot go away
// while a volume is being made from it.
func (p *Provisioner) protectSource(ctx context.Context, claim *v1.PersistentVolumeClaim, plan *createPlan) error {
	switch plan.source {
	case sourceClone:
		return p.protectCloneSource(ctx, claim.Namespace, plan.sourceName)
	case sourceSnapshot:
		return p.protectSnapshot(ctx, claim.Namespace, plan.sourceName)
	}
	return nil
}

// releaseSource drops the source's protection once no other claim still being provisioned uses it.
func (p *Provisioner) releaseSource(ctx context.Context, claim *v1.PersistentVolumeClaim) error {
	src := sourceOf(claim)
	switch src.kind {
	case sourceClone:
		return p.syncCloneSource(ctx, claim.Namespace, src.name, claim.UID)
	case sourceSnapshot:
		return p.releaseSnapshot(ctx, claim.Namespace, src.name, claim.UID)
	}
	return nil
}

// pendingUsers counts the claims in namespace, other than the one with UID except, that are still being
// provisioned from the given source: not bound to a PV, and either alive or with a journal entry or legacy intent (their
// clean-up needs the source), including entries of the journal whose claim is gone already.
func (p *Provisioner) pendingUsers(namespace string, kind sourceKind, name string, except types.UID) (int, error) {
	claims, err := p.Claims.PersistentVolumeClaims(namespace).List(everything)
	if err != nil {
		return 0, err
	}
	n := 0
	listed := map[types.UID]bool{}
	for _, c := range claims {
		listed[c.UID] = true
		if except != "" && c.UID == except {
			continue
		}
		s := sourceOf(c)
		if s.kind != kind || s.name != name || s.otherNS != "" || c.Spec.VolumeName != "" {
			continue
		}
		if c.DeletionTimestamp == nil || hasLegacyIntent(c) || p.journaled(c.UID) {
			n++
		}
	}
	if p.Journal != nil {
		for _, uid := range p.Journal.usersOf(namespace, kind, name) {
			if uid != except && !listed[uid] {
				n++
			}
		}
	}
	return n, nil
}
