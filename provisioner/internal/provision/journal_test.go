package provision

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"

	"github.com/stowage-csi/stowage/provisioner/internal/testutil"
)

// upstreamWritesPerClaim is external-provisioner v6.4.0's API writes per provisioned claim, Events included (PV
// create, 2 Events, and retries), as measured by the provisioner storm of stowage-csi/stowage#14 from the API
// server's audit log at QPS 5 / burst 10.
const upstreamWritesPerClaim = 3.1

// A burst of claims synced by concurrent workers, as the controller runs them: each claim costs its PV create and
// its 2 Events, and the journal a few Lease writes for the whole burst (group commit), so the writes per
// claim stay at or under upstream's. The fake API server takes a few milliseconds per Lease write, as a real one
// does, which is what lets the entries of a burst gather into one write.
func TestBurstWritesPerClaimAtMostUpstreams(t *testing.T) {
	const claims, workers = 200, 50
	class := testutil.Class("fast", nil)
	objs := []runtime.Object{class}
	var list []*v1.PersistentVolumeClaim
	for i := range claims {
		c := testutil.Claim("ns", fmt.Sprintf("c%03d", i), fmt.Sprintf("uid-%03d", i), "fast", "1Gi")
		list = append(list, c)
		objs = append(objs, c)
	}
	h := newHarness(t, defaultConfig(), objs...)
	h.rec = record.NewFakeRecorder(3 * claims)
	h.p.Recorder = h.rec
	h.journal.cfg.Window = 20 * time.Millisecond
	h.kube.PrependReactor("update", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		time.Sleep(5 * time.Millisecond)
		return false, nil, nil
	})

	work := make(chan *v1.PersistentVolumeClaim)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for c := range work {
				if err := h.p.SyncClaim(context.Background(), c.DeepCopy()); err != nil {
					t.Errorf("claim %s: %v", c.Name, err)
				}
			}
		})
	}
	for _, c := range list {
		work <- c
	}
	close(work)
	wg.Wait()
	// The cleared entries go with the next write, here the last one.
	h.journal.Flush(context.Background())

	counts := map[string]int{}
	for _, a := range h.actions() {
		counts[a]++
	}
	events := len(h.events())
	writes := 0
	for a, n := range counts {
		switch a {
		case "create persistentvolumes", "update leases", "create leases":
			writes += n
		default:
			t.Errorf("%d unexpected requests %q in the burst", n, a)
		}
	}
	perClaim := float64(writes+events) / claims
	t.Logf("%d claims, %d workers: %d PV creates, %d Lease writes, %d Events: %.3f writes per claim (upstream %.1f)",
		claims, workers, counts["create persistentvolumes"], counts["update leases"], events, perClaim, upstreamWritesPerClaim)
	if counts["create persistentvolumes"] != claims || events != 2*claims {
		t.Errorf("PV creates %d, Events %d; want %d and %d", counts["create persistentvolumes"], events, claims, 2*claims)
	}
	if writes > claims*11/10 {
		t.Errorf("%d writes besides Events for %d claims: the record is not amortized", writes, claims)
	}
	if perClaim > upstreamWritesPerClaim {
		t.Errorf("%.3f writes per claim, more than upstream's %.1f", perClaim, upstreamWritesPerClaim)
	}
	if got := h.leaseEntries(t); len(got) != 0 {
		t.Errorf("%d entries left in the journal after every claim got its PV", len(got))
	}
}

// The entry is acknowledged before CreateVolume: a record write that fails means no CreateVolume.
func TestNoCreateVolumeWithoutAnAcknowledgedEntry(t *testing.T) {
	claim := testutil.Claim("ns", "data", uid, "fast", "1Gi")
	h := newHarness(t, defaultConfig(), claim, testutil.Class("fast", nil))
	h.failVerb("update", "leases")
	if err := h.p.SyncClaim(context.Background(), claim.DeepCopy()); err == nil {
		t.Fatal("sync succeeded with the record write failing")
	}
	if len(h.csi.Creates) != 0 {
		t.Errorf("CreateVolume called %d times without an acknowledged journal entry", len(h.csi.Creates))
	}
}

// restarted is a second provisioner over the same API server and driver, as after kill -9 or a leader handover:
// it loads the record and returns the claim keys it must sync.
func (h *harness) restarted(t *testing.T) (*Provisioner, []string) {
	t.Helper()
	j := NewJournal(h.kube.CoordinationV1().Leases(journalNS), JournalConfig{Name: journalName})
	keys, err := j.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	go j.Run(ctx)
	deps := h.p.Deps
	deps.Journal = j
	h.journal = j
	return New(h.p.cfg, deps), keys
}

// Killed between the record write and the end of CreateVolume (the driver made the volume anyway), then the
// claim deleted while no provisioner ran: the next one finds the entry, learns the volume's ID from the recorded
// request (the StorageClass is gone too), deletes the volume and clears the entry.
func TestRestartAfterKillUndoesTheVolumeOfAGoneClaim(t *testing.T) {
	claim := testutil.Claim("ns", "data", uid, "fast", "1Gi")
	class := testutil.Class("fast", map[string]string{"type": "gp3"})
	h := newHarness(t, defaultConfig(), claim, class)
	recorded(claim)(h) // CreateVolume timed out; the process dies here
	h.csi.Put(volName) // the backend finished the call anyway

	for _, k := range []string{"pvc", "sc"} {
		for _, o := range h.indexer[k].List() {
			if err := h.indexer[k].Delete(o); err != nil {
				t.Fatal(err)
			}
		}
	}
	p2, keys := h.restarted(t)
	if len(keys) != 1 || keys[0] != "ns/data" {
		t.Fatalf("recovered claims %q, want [ns/data]", keys)
	}
	if err := p2.SyncGoneClaim(context.Background(), "ns", "data"); err != nil {
		t.Fatal(err)
	}
	if h.csi.Count() != 0 || len(h.csi.Deletes) != 1 || h.csi.Creates[0].Parameters["type"] != "gp3" {
		t.Errorf("volumes left %d, DeleteVolume calls %d, clean-up request %v", h.csi.Count(), len(h.csi.Deletes), h.csi.Creates)
	}
	if got := h.leaseEntries(t); len(got) != 0 {
		t.Errorf("entries left: %v", got)
	}
}

// Killed after CreateVolume, the claim still there: the next provisioner makes the PV with the recorded name.
func TestRestartAfterKillFinishesALiveClaim(t *testing.T) {
	claim := testutil.Claim("ns", "data", uid, "fast", "1Gi")
	h := newHarness(t, defaultConfig(), claim, testutil.Class("fast", nil))
	recorded(claim)(h)
	h.csi.Put(volName)
	p2, keys := h.restarted(t)
	if len(keys) != 1 {
		t.Fatalf("recovered claims %q", keys)
	}
	if err := p2.SyncClaim(context.Background(), claim.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	if pv := h.pv(t, volName); pv.Spec.ClaimRef.UID != claim.UID {
		t.Errorf("PV %s claimRef %v", pv.Name, pv.Spec.ClaimRef)
	}
	if h.csi.Count() != 1 {
		t.Errorf("driver holds %d volumes, want the one", h.csi.Count())
	}
	if got := h.leaseEntries(t); len(got) != 0 {
		t.Errorf("entries left: %v", got)
	}
}

// A claim deleted and re-created under the same name: the old claim's entry (keyed by UID) is undone, the new
// claim provisioned with its own volume.
func TestRecreatedClaimUndoesTheOldEntry(t *testing.T) {
	old := testutil.Claim("ns", "data", uid, "fast", "1Gi")
	h := newHarness(t, defaultConfig(), testutil.Class("fast", nil))
	recorded(old)(h)
	h.csi.Put(volName)
	fresh := testutil.Claim("ns", "data", "new-uid", "fast", "1Gi")
	if err := h.p.SyncClaim(context.Background(), fresh); err != nil {
		t.Fatal(err)
	}
	if h.csi.Count() != 1 || len(h.csi.Deletes) != 1 {
		t.Errorf("volumes %d, deletes %d: want the old one deleted, the new one made", h.csi.Count(), len(h.csi.Deletes))
	}
	if _, ok := h.leaseEntries(t)[uid]; ok {
		t.Error("old claim's entry left")
	}
	h.pv(t, "pvc-new-uid")
}

// The provisioner secret a recorded request needs is gone: the volume may exist and cannot be found without it,
// so the entry stays and the clean-up retries slowly.
func TestUndoWithoutItsSecretKeepsTheEntry(t *testing.T) {
	claim := testutil.Claim("ns", "data", uid, "fast", "1Gi")
	class := testutil.Class("fast", map[string]string{
		"csi.storage.k8s.io/provisioner-secret-name": "s", "csi.storage.k8s.io/provisioner-secret-namespace": "ns",
	})
	secret := &v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "s"}, Data: map[string][]byte{"k": []byte("v")}}
	h := newHarness(t, defaultConfig(), claim, class, secret)
	recorded(claim)(h)
	if err := h.kube.CoreV1().Secrets("ns").Delete(context.Background(), "s", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	err := h.p.SyncGoneClaim(context.Background(), "ns", "data")
	if !IsSlow(err) || len(h.csi.Creates) != 0 {
		t.Errorf("err %v (slow %v), CreateVolume calls %d; want a slow error and no call", err, IsSlow(err), len(h.csi.Creates))
	}
	e, ok := h.leaseEntries(t)[uid]
	if !ok || e.SecretName != "s" {
		t.Errorf("entry %+v (present %v), want it kept with its secret reference", e, ok)
	}
	if lease, _ := h.kube.CoordinationV1().Leases(journalNS).Get(context.Background(), journalName, metav1.GetOptions{}); lease != nil {
		for _, v := range lease.Annotations {
			if strings.Contains(v, `"k"`) {
				t.Errorf("secret data in the record: %s", v)
			}
		}
	}
}

// A leader and its successor writing the same Lease: each write is a resourceVersion-guarded Update re-applied to
// a fresh copy on 409 Conflict, so neither loses the other's entries.
func TestTwoWritersKeepEachOthersEntries(t *testing.T) {
	h := newHarness(t, defaultConfig())
	a := h.journal
	b := NewJournal(h.kube.CoordinationV1().Leases(journalNS), JournalConfig{Name: journalName})
	if _, err := b.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	go b.Run(ctx)
	entry := func(id string) journalEntry {
		return journalEntry{UID: types.UID(id), Namespace: "ns", Name: id, Volume: "pvc-" + id, Request: []byte{1}}
	}
	if err := a.Record(ctx, entry("a1")); err != nil {
		t.Fatal(err)
	}
	// b's cached copy is older than a's write: its Update conflicts and is re-applied.
	if err := b.Record(ctx, entry("b1")); err != nil {
		t.Fatal(err)
	}
	if err := a.Record(ctx, entry("a2")); err != nil {
		t.Fatal(err)
	}
	got := h.leaseEntries(t)
	for _, id := range []types.UID{"a1", "a2", "b1"} {
		if _, ok := got[id]; !ok {
			t.Errorf("entry %s lost; record holds %v", id, got)
		}
	}
	a.Clear("a1")
	b.Clear("b1") // b knows b1; a's clear of a1 must not be undone by b's write
	b.Flush(ctx)
	a.Flush(ctx)
	got = h.leaseEntries(t)
	if len(got) != 1 {
		t.Errorf("record holds %v, want only a2", got)
	}
}

// The claim's entry stays while CreateVolume's outcome is unknown: the driver busy with it, or the PV create
// failing.
func TestEntryStaysWhileTheVolumeMayExist(t *testing.T) {
	claim := testutil.Claim("ns", "data", uid, "fast", "1Gi")
	h := newHarness(t, defaultConfig(), claim, testutil.Class("fast", nil))
	h.csi.CreateErr = testutil.Code(codes.Aborted)
	if err := h.p.SyncClaim(context.Background(), claim.DeepCopy()); err == nil {
		t.Fatal("no error")
	}
	if _, ok := h.leaseEntries(t)[uid]; !ok {
		t.Error("entry dropped while the driver may still make the volume")
	}
	// The claim goes: the entry is undone by the worker that owns the key.
	h.csi.CreateErr = nil
	h.csi.Put(volName)
	if err := h.p.SyncGoneClaim(context.Background(), "ns", "data"); err != nil {
		t.Fatal(err)
	}
	if h.csi.Count() != 0 {
		t.Error("volume leaked")
	}
	if _, err := h.kube.CoreV1().PersistentVolumes().Get(context.Background(), volName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("PV of a gone claim: %v", err)
	}
}

// kill -9 between any two steps of a claim (record write, CreateVolume, PV create, clearing write), then the
// claim kept or deleted, then a new provisioner: no volume is left that no PV records, a kept claim gets exactly
// its one volume and PV, and the record ends empty.
func TestKilledBetweenAnyTwoStepsLeaksNothing(t *testing.T) {
	steps := []struct {
		name string
		run  func(t *testing.T, h *harness, claim *v1.PersistentVolumeClaim)
	}{
		{"before the record write", func(*testing.T, *harness, *v1.PersistentVolumeClaim) {}},
		{"after the record write, before CreateVolume", func(_ *testing.T, h *harness, c *v1.PersistentVolumeClaim) { recorded(c)(h) }},
		{"during CreateVolume (the driver makes the volume anyway)", func(_ *testing.T, h *harness, c *v1.PersistentVolumeClaim) {
			recorded(c)(h)
			h.csi.Put(volName)
		}},
		{"after the PV create, before the clearing write", func(t *testing.T, h *harness, c *v1.PersistentVolumeClaim) {
			if err := h.p.SyncClaim(context.Background(), c.DeepCopy()); err != nil {
				t.Fatal(err)
			}
		}},
		{"after the clearing write", func(t *testing.T, h *harness, c *v1.PersistentVolumeClaim) {
			if err := h.p.SyncClaim(context.Background(), c.DeepCopy()); err != nil {
				t.Fatal(err)
			}
			h.journal.Flush(context.Background())
		}},
	}
	for _, st := range steps {
		for _, deleted := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s, claim deleted %v", st.name, deleted), func(t *testing.T) {
				ctx := context.Background()
				claim := testutil.Claim("ns", "data", uid, "fast", "1Gi")
				h := newHarness(t, defaultConfig(), claim, testutil.Class("fast", nil))
				st.run(t, h, claim)
				// The process is gone; what it knew in memory too.
				p2, keys := h.restarted(t)
				if deleted {
					if err := h.kube.CoreV1().PersistentVolumeClaims("ns").Delete(ctx, "data", metav1.DeleteOptions{}); err != nil {
						t.Fatal(err)
					}
					if err := h.indexer["pvc"].Delete(claim); err != nil {
						t.Fatal(err)
					}
				}
				for _, k := range keys {
					if k != "ns/data" {
						t.Fatalf("recovered key %q", k)
					}
				}
				if deleted {
					if err := p2.SyncGoneClaim(ctx, "ns", "data"); err != nil {
						t.Fatal(err)
					}
				} else if err := p2.SyncClaim(ctx, h.claim(t, "ns", "data")); err != nil {
					t.Fatal(err)
				}
				pvs, err := h.kube.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
				if err != nil {
					t.Fatal(err)
				}
				recordedBy := map[string]bool{}
				for _, pv := range pvs.Items {
					recordedBy[pv.Name] = true
				}
				for id, req := range h.csi.Volumes {
					if !recordedBy[req.Name] {
						t.Errorf("volume %s (%s) leaked: no PV records it", id, req.Name)
					}
				}
				if !deleted && (h.csi.Count() != 1 || len(pvs.Items) != 1) {
					t.Errorf("kept claim: %d volumes, %d PVs; want 1 and 1", h.csi.Count(), len(pvs.Items))
				}
				if got := h.leaseEntries(t); len(got) != 0 {
					t.Errorf("record holds %v after the restart's sync", got)
				}
			})
		}
	}
}

// Every provisioner identity has a record of its own: the driver's, or under --node-deployment the driver's on
// one node, so node-local provisioners never write one Lease.
func TestJournalNamePerIdentity(t *testing.T) {
	for _, tc := range []struct{ lock, node, want string }{
		{"ebs-csi-aws-com", "", "ebs-csi-aws-com-intents"},
		{"ebs-csi-aws-com", "ip-10-0-0-1.ec2.internal", "ebs-csi-aws-com-intents-ip-10-0-0-1.ec2.internal"},
		{"ebs-csi-aws-com", "Node-B", "ebs-csi-aws-com-intents-node-b"},
	} {
		if got := JournalName(tc.lock, tc.node); got != tc.want {
			t.Errorf("JournalName(%q, %q) = %q, want %q", tc.lock, tc.node, got, tc.want)
		}
	}
	if long := JournalName(strings.Repeat("a", 250), "n"); len(long) > 253 {
		t.Errorf("name of %d characters", len(long))
	}
}
