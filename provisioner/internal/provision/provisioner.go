package provision

import (
	"context"
	"sync"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	snapclient "github.com/kubernetes-csi/external-snapshotter/client/v8/clientset/versioned"
	"google.golang.org/grpc"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/client-go/tools/record"

	"github.com/stowage-csi/stowage/provisioner/internal/metrics"
)

// CSIController is the part of the CSI controller service the provisioner calls; csi.ControllerClient has it.
// GetCapacity is called only under --node-deployment, before taking an immediate claim.
type CSIController interface {
	CreateVolume(ctx context.Context, in *csi.CreateVolumeRequest, opts ...grpc.CallOption) (*csi.CreateVolumeResponse, error)
	DeleteVolume(ctx context.Context, in *csi.DeleteVolumeRequest, opts ...grpc.CallOption) (*csi.DeleteVolumeResponse, error)
	GetCapacity(ctx context.Context, in *csi.GetCapacityRequest, opts ...grpc.CallOption) (*csi.GetCapacityResponse, error)
}

// Capabilities are the driver's controller capabilities that change what the provisioner does, probed once at
// start-up.
type Capabilities struct {
	Topology              bool // PluginCapability VOLUME_ACCESSIBILITY_CONSTRAINTS
	Clone                 bool // CLONE_VOLUME
	Snapshot              bool // CREATE_DELETE_SNAPSHOT (restore needs it)
	SingleNodeMultiWriter bool // SINGLE_NODE_MULTI_WRITER: ReadWriteOncePod maps to SINGLE_NODE_SINGLE_WRITER
	ModifyVolume          bool // MODIFY_VOLUME: VolumeAttributesClass parameters go to CreateVolume
	GetCapacity           bool // GET_CAPACITY: needed for --enable-capacity
}

// Config is what the flags decide.
type Config struct {
	DriverName string
	// Identity goes into every PV's volume attributes (storage.kubernetes.io/csiProvisionerIdentity).
	Identity                    string
	VolumeNamePrefix            string
	VolumeNameUUIDLength        int // <0: keep the whole UID
	Timeout                     time.Duration
	StrictTopology              bool
	ImmediateTopology           bool
	ExtraCreateMetadata         bool
	DefaultFSType               string
	ControllerPublishReadOnly   bool
	PreventVolumeModeConversion bool
	// NodeName, when set (--node-deployment), restricts the provisioner to claims selected for that node.
	NodeName string
	// NodeDeploymentImmediateBinding lets a node-local provisioner take immediate-binding claims
	// (--node-deployment-immediate-binding).
	NodeDeploymentImmediateBinding bool
	Capabilities                   Capabilities
	// AttrClassesServed says the API server serves storage.k8s.io/v1 VolumeAttributesClasses; the provisioner
	// then reads the classes claims name with direct GETs (no informer: upstream's RBAC grants only get).
	AttrClassesServed bool
	// AttrClassesIgnored says the VolumeAttributesClass feature gate is off (--feature-gates, or ENABLE_VAC_FALLBACK
	// with the API not served). As upstream, a claim's spec.volumeAttributesClassName is then ignored: the volume
	// is made without mutable_parameters and the PV names no class.
	AttrClassesIgnored bool
}

// Deps are the clients and caches the provisioner reads and writes through.
type Deps struct {
	Kube      kubernetes.Interface
	Snapshots snapclient.Interface // nil: restoring from VolumeSnapshots fails with an Event
	CSI       CSIController
	Claims    corelisters.PersistentVolumeClaimLister
	Volumes   corelisters.PersistentVolumeLister
	Classes   storagelisters.StorageClassLister
	CSINodes  storagelisters.CSINodeLister
	Nodes     corelisters.NodeLister
	// Attachments guards deletion: no DeleteVolume while a VolumeAttachment names the PV.
	Attachments storagelisters.VolumeAttachmentLister
	Recorder    record.EventRecorder
	Metrics     *metrics.Metrics
	// Journal is the journal (journal.go); provisioning refuses to call CreateVolume without one.
	Journal *Journal
	// Capacity, with --enable-capacity, is told of every volume made or deleted and every failed CreateVolume;
	// nil without.
	Capacity CapacityRefresher
}

// CapacityRefresher refreshes the published capacity a volume change may have changed: that of the segments of
// the node affinity, or with none, that of class.
type CapacityRefresher interface {
	Refresh(class string, affinity *v1.VolumeNodeAffinity)
}

// refreshCapacity tells the capacity controller, if any, about a volume change.
func (p *Provisioner) refreshCapacity(class string, affinity *v1.VolumeNodeAffinity) {
	if p.Capacity != nil {
		p.Capacity.Refresh(class, affinity)
	}
}

// Provisioner provisions and deletes the volumes of one CSI driver. Its Sync methods are safe for concurrent use
// on different objects; the caller's work queues never hand one object to two workers at once.
type Provisioner struct {
	cfg Config
	Deps
	csiNodes storagelisters.CSINodeLister
	nodes    corelisters.NodeLister
	// attrClasses is nil when the cluster serves no VolumeAttributesClass v1 API.
	attrClasses *attrClassCache
	// migr is the in-tree plugin that migrates to the driver, if any (migration.go).
	migr migration

	// deleted remembers, by PV name, PVs whose volume DeleteVolume already removed, so the informer events
	// caused by our own PV writes never lead to a second DeleteVolume
	// (kubernetes-csi/external-provisioner#1235). claimDone remembers, by "namespace/name", claims whose PV this
	// process created and whose journal entry or legacy intent it released, so that the informer's stale copies (still
	// showing the legacy intent, or no PV yet) neither repeat CreateVolume nor the release.
	//
	// An entry may go only when no worker can still be handed a copy of its object: the controller calls Forget
	// and ForgetClaim from the worker that owns the key, after the lister no longer has the object. The informer's
	// delete handler must not: it runs after the cache dropped the object, but a worker may have taken a stale
	// copy just before, and would act on it with the record gone.
	mu        sync.Mutex
	deleted   map[string]pvRecord
	claimDone map[string]claimRecord
}

// pvRecord is how far the deletion of the PV with this UID got in this process. The UID tells a PV apart
// from a later one of the same name.
type pvRecord struct {
	uid   types.UID
	stage deleteStage
}

// claimRecord is how far provisioning of the claim with this UID got in this process.
type claimRecord struct {
	uid   types.UID
	stage claimStage
}

// claimStage is how far provisioning of a claim got in this process.
type claimStage int

const (
	claimNone claimStage = iota
	claimPVCreated
	claimReleased
)

func claimKey(claim *v1.PersistentVolumeClaim) string { return claim.Namespace + "/" + claim.Name }

func (p *Provisioner) claimStage(claim *v1.PersistentVolumeClaim) claimStage {
	p.mu.Lock()
	defer p.mu.Unlock()
	if r, ok := p.claimDone[claimKey(claim)]; ok && r.uid == claim.UID {
		return r.stage
	}
	return claimNone
}

func (p *Provisioner) setClaimStage(claim *v1.PersistentVolumeClaim, s claimStage) {
	p.mu.Lock()
	p.claimDone[claimKey(claim)] = claimRecord{uid: claim.UID, stage: s}
	p.mu.Unlock()
}

// ForgetClaim drops what the provisioner remembers about the claim namespace/name. Call it only once the claim
// is gone from the lister, from the worker that owns the claim's key (see Provisioner.claimDone).
func (p *Provisioner) ForgetClaim(namespace, name string) {
	p.mu.Lock()
	delete(p.claimDone, namespace+"/"+name)
	p.mu.Unlock()
}

// New returns a Provisioner.
func New(cfg Config, deps Deps) *Provisioner {
	p := &Provisioner{cfg: cfg, Deps: deps, csiNodes: deps.CSINodes, nodes: deps.Nodes, deleted: map[string]pvRecord{}, claimDone: map[string]claimRecord{}, migr: newMigration(cfg.DriverName)}
	if cfg.AttrClassesServed {
		p.attrClasses = newAttrClassCache(deps.Kube.StorageV1().VolumeAttributesClasses().Get, attrClassTTL, time.Now)
	}
	return p
}

// Forget drops what the provisioner remembers about the PV name. Call it only once the PV is gone from the
// lister, from the worker that owns the PV's key (see Provisioner.deleted).
func (p *Provisioner) Forget(name string) {
	p.mu.Lock()
	delete(p.deleted, name)
	p.mu.Unlock()
}

// GetSecret implements secretGetter with a direct GET: secrets are read only when a call needs one.
func (p *Provisioner) GetSecret(ctx context.Context, namespace, name string) (*v1.Secret, error) {
	return p.Kube.CoreV1().Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
}

// volumeName is the CSI volume name and PV name for a claim: <prefix>-<uid>, with the UID's dashes removed and
// cut to --volume-name-uuid-length when that is set, as upstream does.
func (p *Provisioner) volumeName(uid types.UID) string {
	id := string(uid)
	if p.cfg.VolumeNameUUIDLength >= 0 {
		id = stripDashes(id)
		if len(id) > p.cfg.VolumeNameUUIDLength {
			id = id[:p.cfg.VolumeNameUUIDLength]
		}
	}
	return p.cfg.VolumeNamePrefix + "-" + id
}

func stripDashes(s string) string {
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		if s[i] != '-' {
			out = append(out, s[i])
		}
	}
	return string(out)
}
