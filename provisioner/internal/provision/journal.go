package provision

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
)

// The journal is how the provisioner keeps its leak guarantee without writing to each claim: before the
// first CreateVolume of a claim, an entry for it (claim UID, namespace/name, volume name, and the request a later
// clean-up repeats to learn the volume's ID) is in a Lease of the provisioner's own, and it leaves that Lease
// only once the PV records the volume or the volume is deleted. Entries are written in batches (group commit):
// the workers that want an entry written while a write is in flight wait for the next one, which carries all of
// them, so a burst of claims costs a few Lease writes, not one per claim. Removals cost nothing of their own:
// they ride on the next batch, or are flushed alone after ClearAfter of quiet.
//
// A Lease, because upstream's RBAC (which a drop-in must work under) grants get/list/watch/create/update/delete
// on leases in the provisioner's namespace and no write on anything else of its own. Each identity has its own
// Lease (the driver's, or the driver's on one node under --node-deployment), so no two running provisioners
// share one except a leader and its successor, whose writes are resourceVersion-guarded Updates of single
// annotations re-applied to a fresh copy on 409 Conflict: neither loses the other's entries.

// journalAnnPrefix prefixes each entry's annotation; the rest of the key is the claim's UID, so an entry of a
// deleted claim is never confused with one of a claim re-created under the same name.
const journalAnnPrefix = "intent.provisioner.stowage-csi.io/"

// maxJournalBytes bounds the entries one Lease holds, well under the API server's 256 KiB for all annotations.
// A claim that would overflow it waits (its sync fails and is retried) until entries are cleared.
const maxJournalBytes = 200 << 10

// journalEntry is one claim whose volume may exist in the driver with no PV recording it.
type journalEntry struct {
	UID       types.UID `json:"-"`
	Namespace string    `json:"namespace"`
	Name      string    `json:"name"`
	Volume    string    `json:"volume"`
	// Request is the CreateVolumeRequest (deterministic protobuf, base64 in the JSON; secrets left out):
	// repeating it returns the volume's ID, with no need of the claim or its StorageClass, which may both be gone
	// by then.
	Request []byte `json:"request"`
	// SecretName/SecretNamespace name the provisioner secret the request needs, read again at clean-up.
	SecretName      string `json:"secretName,omitempty"`
	SecretNamespace string `json:"secretNamespace,omitempty"`
	// SourceKind/SourceName are the clone source or snapshot protected for the claim, released after it.
	SourceKind sourceKind `json:"sourceKind,omitempty"`
	SourceName string     `json:"sourceName,omitempty"`
}

func (e journalEntry) encode() (string, error) {
	b, err := json.Marshal(e)
	return string(b), err
}

// LeaseClient is the part of a typed Lease client the journal uses.
type LeaseClient interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*coordinationv1.Lease, error)
	Create(ctx context.Context, lease *coordinationv1.Lease, opts metav1.CreateOptions) (*coordinationv1.Lease, error)
	Update(ctx context.Context, lease *coordinationv1.Lease, opts metav1.UpdateOptions) (*coordinationv1.Lease, error)
}

// JournalConfig places and paces a Journal.
type JournalConfig struct {
	// Name is the Lease's name (JournalName).
	Name string
	// Window is how long a write waits after the first entry of a batch, so a burst lands in few writes.
	Window time.Duration
	// ClearAfter is how long removals wait for a write to ride on before they are written alone.
	ClearAfter time.Duration
}

// JournalName is the Lease of the provisioner of driver (lockName is its leader election lock name), one per node
// under --node-deployment.
func JournalName(lockName, nodeName string) string {
	name := lockName + "-intents"
	if nodeName != "" {
		name += "-" + strings.ToLower(nodeName)
	}
	if len(name) > 253 {
		name = name[:253]
	}
	return strings.TrimRight(name, "-.")
}

// Journal is the journal of one provisioner identity. Its methods are safe for concurrent use; Run writes.
type Journal struct {
	cfg    JournalConfig
	leases LeaseClient

	mu sync.Mutex
	// entries are what the Lease holds as of the last read or write: this process's entries and a predecessor's.
	entries map[types.UID]journalEntry
	// adds wait for the next write; each waiter gets that write's result.
	adds    map[types.UID]string
	waiters []chan error
	// removes are cleared entries not written yet.
	removes map[types.UID]bool
	// clearArmed says a flush of removals alone is scheduled.
	clearArmed bool
	lease      *coordinationv1.Lease
	// absent says Load found no Lease: the first write creates it without reading it first.
	absent bool
	kick   chan struct{}
}

// NewJournal returns a Journal writing to the Lease cfg.Name through leases. Call Load, then Run.
func NewJournal(leases LeaseClient, cfg JournalConfig) *Journal {
	return &Journal{
		cfg: cfg, leases: leases,
		entries: map[types.UID]journalEntry{}, adds: map[types.UID]string{}, removes: map[types.UID]bool{},
		kick: make(chan struct{}, 1),
	}
}

// Load reads the Lease (a previous process's entries) and returns the namespace/name keys of its claims, which
// the caller must sync: each entry is either finished (its PV is created or found) or undone.
func (j *Journal) Load(ctx context.Context) ([]string, error) {
	lease, err := j.leases.Get(ctx, j.cfg.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		j.mu.Lock()
		j.absent = true
		j.mu.Unlock()
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read journal Lease %s: %w", j.cfg.Name, err)
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	j.lease = lease
	j.entries = parseEntries(klog.FromContext(ctx), lease)
	var keys []string
	for _, e := range j.entries {
		keys = append(keys, e.Namespace+"/"+e.Name)
	}
	return keys, nil
}

func parseEntries(logger klog.Logger, lease *coordinationv1.Lease) map[types.UID]journalEntry {
	out := map[types.UID]journalEntry{}
	for k, v := range lease.Annotations {
		uid, ok := strings.CutPrefix(k, journalAnnPrefix)
		if !ok {
			continue
		}
		var e journalEntry
		if err := json.Unmarshal([]byte(v), &e); err != nil || e.Volume == "" || e.Name == "" {
			// Kept in the Lease (never cleared by us): a human can read what it was.
			logger.Error(err, "Unreadable journal entry, ignored", "lease", lease.Name, "key", k)
			continue
		}
		e.UID = types.UID(uid)
		out[e.UID] = e
	}
	return out
}

// Entry returns the entry of the claim with uid, if the Lease holds one.
func (j *Journal) Entry(uid types.UID) (journalEntry, bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.removes[uid] {
		return journalEntry{}, false
	}
	e, ok := j.entries[uid]
	return e, ok
}

// ForClaim returns the entries of claims named namespace/name (a claim and earlier ones of the same name).
func (j *Journal) ForClaim(namespace, name string) []journalEntry {
	j.mu.Lock()
	defer j.mu.Unlock()
	var out []journalEntry
	for uid, e := range j.entries {
		if e.Namespace == namespace && e.Name == name && !j.removes[uid] {
			out = append(out, e)
		}
	}
	return out
}

// usersOf returns the UIDs of entries in namespace whose claim's volume is made from source kind/name.
func (j *Journal) usersOf(namespace string, kind sourceKind, name string) []types.UID {
	j.mu.Lock()
	defer j.mu.Unlock()
	var out []types.UID
	for uid, e := range j.entries {
		if e.Namespace == namespace && e.SourceKind == kind && e.SourceName == name && !j.removes[uid] {
			out = append(out, uid)
		}
	}
	return out
}

// Record makes sure the Lease holds e, and returns once the API server has acknowledged the write that put it
// there: only then may CreateVolume run. An entry the Lease already holds unchanged costs nothing.
func (j *Journal) Record(ctx context.Context, e journalEntry) error {
	val, err := e.encode()
	if err != nil {
		return fmt.Errorf("encode journal entry: %w", err)
	}
	j.mu.Lock()
	if cur, ok := j.entries[e.UID]; ok && !j.removes[e.UID] {
		if old, err := cur.encode(); err == nil && old == val {
			j.mu.Unlock()
			return nil
		}
	}
	if size := j.sizeLocked() + len(val); size > maxJournalBytes {
		j.mu.Unlock()
		return fmt.Errorf("journal Lease %s is full (%d bytes of entries): waiting for claims in flight to finish", j.cfg.Name, size)
	}
	delete(j.removes, e.UID)
	j.adds[e.UID] = val
	done := make(chan error, 1)
	j.waiters = append(j.waiters, done)
	j.mu.Unlock()
	j.poke()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (j *Journal) sizeLocked() int {
	n := 0
	for uid, e := range j.entries {
		if j.removes[uid] {
			// Dropped by the very write that will carry the new entry.
			continue
		}
		if v, err := e.encode(); err == nil {
			n += len(v) + len(journalAnnPrefix) + len(e.UID)
		}
	}
	for _, v := range j.adds {
		n += len(v)
	}
	return n
}

// Clear drops the entry of uid at the next write; it writes nothing by itself.
func (j *Journal) Clear(uid types.UID) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if _, ok := j.entries[uid]; !ok {
		return
	}
	j.removes[uid] = true
	if !j.clearArmed && j.cfg.ClearAfter > 0 {
		j.clearArmed = true
		time.AfterFunc(j.cfg.ClearAfter, j.poke)
	}
}

func (j *Journal) poke() {
	select {
	case j.kick <- struct{}{}:
	default:
	}
}

// Run writes batches until ctx ends; waiters left then get ctx's error.
func (j *Journal) Run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			j.failWaiters(ctx.Err())
			return
		case <-j.kick:
		}
		if j.pendingAdds() && j.cfg.Window > 0 {
			select {
			case <-ctx.Done():
				j.failWaiters(ctx.Err())
				return
			case <-time.After(j.cfg.Window):
			}
		}
		j.Flush(ctx)
	}
}

func (j *Journal) pendingAdds() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return len(j.adds) > 0
}

func (j *Journal) failWaiters(err error) {
	j.mu.Lock()
	waiters := j.waiters
	j.waiters, j.adds = nil, map[types.UID]string{}
	j.mu.Unlock()
	for _, w := range waiters {
		w <- err
	}
}

// Flush writes what is pending (entries to add, entries cleared) in one Update of the Lease, and tells the
// waiters of the added entries how it went.
func (j *Journal) Flush(ctx context.Context) {
	j.mu.Lock()
	adds, waiters := j.adds, j.waiters
	removes := make(map[types.UID]bool, len(j.removes))
	for uid := range j.removes {
		removes[uid] = true
	}
	j.adds, j.waiters, j.clearArmed = map[types.UID]string{}, nil, false
	j.mu.Unlock()
	if len(adds) == 0 && len(removes) == 0 {
		return
	}
	err := j.write(ctx, adds, removes)
	j.mu.Lock()
	if err == nil {
		// Cleared entries stay marked until the write that drops them is acknowledged, so Entry never shows
		// one in between; one re-recorded meanwhile is pending again and not marked.
		for uid := range removes {
			delete(j.removes, uid)
		}
	} else {
		klog.FromContext(ctx).Error(err, "Writing the journal failed", "lease", j.cfg.Name, "adds", len(adds), "removes", len(removes))
		// Removals are retried with the next write; the adds' waiters return the error and retry themselves.
		if len(j.removes) > 0 && !j.clearArmed && j.cfg.ClearAfter > 0 {
			j.clearArmed = true
			time.AfterFunc(j.cfg.ClearAfter, j.poke)
		}
	}
	j.mu.Unlock()
	for _, w := range waiters {
		w <- err
	}
}

// write applies adds and removes to the Lease as one resourceVersion-guarded Update (or the Create of the Lease),
// re-reading it and re-applying them on 409 Conflict.
func (j *Journal) write(ctx context.Context, adds map[types.UID]string, removes map[types.UID]bool) error {
	j.mu.Lock()
	lease, absent := j.lease, j.absent
	j.mu.Unlock()
	for attempt := 0; ; attempt++ {
		if lease == nil && !absent {
			var err error
			lease, err = j.leases.Get(ctx, j.cfg.Name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				lease = nil
			} else if err != nil {
				return fmt.Errorf("read journal Lease %s: %w", j.cfg.Name, err)
			}
		}
		var out *coordinationv1.Lease
		var err error
		if lease == nil {
			fresh := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: j.cfg.Name}}
			apply(fresh, adds, removes)
			out, err = j.leases.Create(ctx, fresh, metav1.CreateOptions{})
		} else {
			changed := lease.DeepCopy()
			if !apply(changed, adds, removes) {
				out = lease
			} else {
				out, err = j.leases.Update(ctx, changed, metav1.UpdateOptions{})
			}
		}
		if err == nil {
			j.mu.Lock()
			j.lease, j.absent = out, false
			j.entries = parseEntries(klog.FromContext(ctx), out)
			j.mu.Unlock()
			return nil
		}
		if (!apierrors.IsConflict(err) && !apierrors.IsAlreadyExists(err) && !apierrors.IsNotFound(err)) || attempt >= 4 {
			return fmt.Errorf("write journal Lease %s: %w", j.cfg.Name, err)
		}
		// Another writer (a predecessor still finishing, or the Lease created meanwhile): re-read and re-apply.
		lease, absent = nil, false
		if ctx.Err() != nil {
			return errors.Join(err, ctx.Err())
		}
	}
}

// apply puts adds into lease's annotations and removes removes; it reports whether anything changed.
func apply(lease *coordinationv1.Lease, adds map[types.UID]string, removes map[types.UID]bool) bool {
	changed := false
	for uid := range removes {
		k := journalAnnPrefix + string(uid)
		if _, ok := lease.Annotations[k]; ok {
			delete(lease.Annotations, k)
			changed = true
		}
	}
	for uid, v := range adds {
		k := journalAnnPrefix + string(uid)
		if lease.Annotations[k] != v {
			metav1.SetMetaDataAnnotation(&lease.ObjectMeta, k, v)
			changed = true
		}
	}
	return changed
}

// Name is the Lease's name.
func (j *Journal) Name() string { return j.cfg.Name }
