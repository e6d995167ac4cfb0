package provision

import (
	"context"
	"fmt"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/protobuf/proto"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
)

// The claim side of the journal (journal.go): what goes into a claim's entry, and how an entry whose claim
// is gone, being deleted, or bound elsewhere is undone.

func (p *Provisioner) journaled(uid types.UID) bool {
	_, ok := p.entry(uid)
	return ok
}

func (p *Provisioner) entry(uid types.UID) (journalEntry, bool) {
	if p.Journal == nil || uid == "" {
		return journalEntry{}, false
	}
	return p.Journal.Entry(uid)
}

func (p *Provisioner) clearEntry(uid types.UID) {
	if p.Journal != nil {
		p.Journal.Clear(uid)
	}
}

// recordEntry puts the claim's entry into the journal and returns once that write is acknowledged.
func (p *Provisioner) recordEntry(ctx context.Context, claim *v1.PersistentVolumeClaim, plan *createPlan, volName string) error {
	if p.Journal == nil {
		return fmt.Errorf("no journal: refusing to call CreateVolume for claim %s/%s", claim.Namespace, claim.Name)
	}
	req, ok := proto.Clone(plan.req).(*csi.CreateVolumeRequest)
	if !ok {
		return fmt.Errorf("copying the CreateVolume request of %s", volName)
	}
	req.Secrets = nil // never in the Lease: the reference below is, and the secret is read again when needed
	// Deterministic, so a retry with the same request finds its entry unchanged and writes nothing.
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(req)
	if err != nil {
		return fmt.Errorf("encode the CreateVolume request of %s: %w", volName, err)
	}
	e := journalEntry{
		UID: claim.UID, Namespace: claim.Namespace, Name: claim.Name, Volume: volName, Request: b,
		SourceKind: plan.source, SourceName: plan.sourceName,
	}
	if r := plan.secrets[secretProvisioner]; r != nil {
		e.SecretName, e.SecretNamespace = r.name, r.namespace
	}
	if err := p.Journal.Record(ctx, e); err != nil {
		return fmt.Errorf("record the journal entry of volume %s: %w", volName, err)
	}
	return nil
}

// SyncGoneClaim undoes the entries of the claim namespace/name, which the cache no longer has: it was deleted
// (maybe during CreateVolume, maybe while no provisioner ran). The controller calls it from the worker owning
// the claim's key.
func (p *Provisioner) SyncGoneClaim(ctx context.Context, namespace, name string) error {
	return p.undoEntries(ctx, namespace, name, "")
}

// undoEntries undoes the entries of claims named namespace/name other than the one with UID keep.
func (p *Provisioner) undoEntries(ctx context.Context, namespace, name string, keep types.UID) error {
	if p.Journal == nil {
		return nil
	}
	for _, e := range p.Journal.ForClaim(namespace, name) {
		if e.UID == keep {
			continue
		}
		if err := p.undo(ctx, e); err != nil {
			return err
		}
	}
	return nil
}

// undo makes sure the volume of an entry whose claim will never get it is not left behind, then clears the
// entry. A PV of the volume's name records it already (its reclaim policy decides). Otherwise the recorded
// CreateVolume request is sent again: it is idempotent, so it returns the volume's ID if the volume exists (a CSI
// volume ID is not its name, and the first call's answer may never have arrived), and that volume is deleted.
func (p *Provisioner) undo(ctx context.Context, e journalEntry) error {
	logger := klog.FromContext(ctx).WithValues("claim", e.Namespace+"/"+e.Name, "claimUID", e.UID, "volume", e.Volume)
	if _, err := p.Kube.CoreV1().PersistentVolumes().Get(ctx, e.Volume, metav1.GetOptions{}); err == nil {
		return p.cleared(ctx, e)
	} else if !apierrors.IsNotFound(err) {
		return fmt.Errorf("get PV %s: %w", e.Volume, err)
	}
	req := &csi.CreateVolumeRequest{}
	if err := proto.Unmarshal(e.Request, req); err != nil || req.Name != e.Volume {
		// Not ours to guess: the entry stays, for a human to read.
		return slow(fmt.Errorf("journal entry of claim %s/%s: unreadable CreateVolume request for %s (%v)", e.Namespace, e.Name, e.Volume, err))
	}
	var secrets map[string]string
	if e.SecretName != "" {
		var err error
		if secrets, err = secretData(ctx, p, &secretRef{name: e.SecretName, namespace: e.SecretNamespace}); err != nil {
			// The volume may exist and cannot be found without its secret: keep the entry, retry slowly.
			return slow(fmt.Errorf("claim %s/%s is gone and volume %s may exist; its CreateVolume request needs a secret: %w", e.Namespace, e.Name, e.Volume, err))
		}
	}
	req.Secrets = secrets
	resp, err := p.createVolume(ctx, req)
	switch {
	case err != nil && maybeInProgress(err):
		return fmt.Errorf("clean-up CreateVolume for gone claim %s/%s: %w", e.Namespace, e.Name, err)
	case err != nil:
		// A final error for the same request: no volume of that name exists.
		logger.V(2).Info("Gone claim left no volume", "err", err)
	default:
		id := resp.GetVolume().GetVolumeId()
		if id == "" {
			return fmt.Errorf("clean-up CreateVolume for %s returned no volume ID", e.Volume)
		}
		if err := p.deleteVolume(ctx, id, secrets); err != nil {
			return err
		}
		logger.Info("Deleted the volume of a claim deleted during provisioning", "volumeID", id)
	}
	return p.cleared(ctx, e)
}

// cleared drops e and then the protection of the source its volume was made from, if no one else uses it.
func (p *Provisioner) cleared(ctx context.Context, e journalEntry) error {
	p.clearEntry(e.UID)
	switch e.SourceKind {
	case sourceClone:
		return p.syncCloneSource(ctx, e.Namespace, e.SourceName, e.UID)
	case sourceSnapshot:
		return p.releaseSnapshot(ctx, e.Namespace, e.SourceName, e.UID)
	}
	return nil
}
