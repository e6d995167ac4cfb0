package provision

import (
	"context"
	"slices"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/stowage-csi/stowage/provisioner/internal/testutil"
)

const uid = "6c3a0e3e-1111-4e2b-9a61-0d6a7f5e0001"

var volName = "pvc-" + uid

func withLegacyIntent(c *v1.PersistentVolumeClaim) {
	c.Finalizers = append(c.Finalizers, IntentKey)
	c.Annotations[IntentKey] = "pvc-" + string(c.UID)
}

func deleting(c *v1.PersistentVolumeClaim) {
	now := metav1.Now()
	c.DeletionTimestamp = &now
}

// recorded is a setup that leaves the claim's entry in the journal, as a sync that timed out in
// CreateVolume does (the driver made no volume), and forgets that sync's requests.
func recorded(claim *v1.PersistentVolumeClaim) func(*harness) {
	return func(h *harness) {
		h.csi.CreateErr = testutil.Code(codes.DeadlineExceeded)
		live := claim.DeepCopy()
		live.DeletionTimestamp = nil
		_ = h.p.SyncClaim(context.Background(), live)
		h.csi.CreateErr, h.csi.Creates = nil, nil
		h.events()
		h.kube.ClearActions()
	}
}

func TestSyncClaim(t *testing.T) {
	class := testutil.Class("fast", map[string]string{
		"type": "gp3", fsTypeKey: "xfs",
		"csi.storage.k8s.io/node-stage-secret-name":      "stage-${pvc.name}",
		"csi.storage.k8s.io/node-stage-secret-namespace": "${pvc.namespace}",
	})
	tests := []struct {
		name    string
		claim   *v1.PersistentVolumeClaim
		class   *storagev1.StorageClass
		objs    []runtime.Object
		setup   func(*harness)
		wantAct []string
		// wantCreates/wantDeletes count CSI calls; wantVolumes is what the driver holds after.
		wantCreates, wantDeletes, wantVolumes int
		// wantIntent: the legacy intent (finalizer and annotation) on the claim; wantEntry: the claim's entry in
		// the journal.
		wantIntent, wantEntry bool
		wantErr, wantSlow     bool
		wantEvent             []string
	}{
		{
			name:  "immediate claim: record entry, PV; no claim write, the entry's removal rides on a later write",
			claim: testutil.Claim("ns", "data", uid, "fast", "1Gi"),
			wantAct: []string{
				"update leases", "create persistentvolumes",
			},
			wantCreates: 1, wantVolumes: 1,
			wantEvent: []string{"Provisioning", "ProvisioningSucceeded"},
		},
		{
			// Claims written before spec.storageClassName existed name their class in the beta annotation,
			// which the binder reads first.
			name: "class named only by the beta annotation: provisioned from it",
			claim: testutil.Claim("ns", "data", uid, "", "1Gi", func(c *v1.PersistentVolumeClaim) {
				c.Spec.StorageClassName = nil
				c.Annotations[betaClassAnnotation] = "fast"
			}),
			wantAct:     []string{"update leases", "create persistentvolumes"},
			wantCreates: 1, wantVolumes: 1,
			wantEvent: []string{"Provisioning", "ProvisioningSucceeded"},
		},
		{
			name:    "unknown csi.storage.k8s.io key: Event names it, no write, no CSI call, slow retry",
			claim:   testutil.Claim("ns", "data", uid, "bad", "1Gi"),
			class:   testutil.Class("bad", map[string]string{"csi.storage.k8s.io/fstyp": "ext4"}),
			wantErr: true, wantSlow: true,
			wantEvent: []string{"ProvisioningFailed", "csi.storage.k8s.io/fstyp"},
		},
		{
			name:    "secret name without namespace: Event names the missing key",
			claim:   testutil.Claim("ns", "data", uid, "bad", "1Gi"),
			class:   testutil.Class("bad", map[string]string{"csi.storage.k8s.io/provisioner-secret-name": "s"}),
			wantErr: true, wantSlow: true,
			wantEvent: []string{"ProvisioningFailed", "csi.storage.k8s.io/provisioner-secret-namespace"},
		},
		{
			name:        "InvalidArgument from the driver: slow retry, intent kept (no write per retry)",
			claim:       testutil.Claim("ns", "data", uid, "fast", "1Gi"),
			setup:       func(h *harness) { h.csi.CreateErr = testutil.Code(codes.InvalidArgument) },
			wantAct:     []string{"update leases"},
			wantCreates: 1, wantEntry: true, wantErr: true, wantSlow: true,
			wantEvent: []string{"ProvisioningFailed", "InvalidArgument"},
		},
		{
			name:        "timeout: intent kept, no PV, normal backoff",
			claim:       testutil.Claim("ns", "data", uid, "fast", "1Gi"),
			setup:       func(h *harness) { h.csi.CreateErr = testutil.Code(codes.DeadlineExceeded) },
			wantAct:     []string{"update leases"},
			wantCreates: 1, wantEntry: true, wantErr: true,
		},
		{
			name:        "retry after timeout with the entry already recorded: nothing written before CreateVolume",
			claim:       testutil.Claim("ns", "data", uid, "fast", "1Gi"),
			setup:       recorded(testutil.Claim("ns", "data", uid, "fast", "1Gi")),
			wantAct:     []string{"create persistentvolumes"},
			wantCreates: 1, wantVolumes: 1,
		},
		{
			name:  "deleted during provisioning, volume exists: the recorded request finds its ID, deleted, entry cleared",
			claim: testutil.Claim("ns", "data", uid, "fast", "1Gi", deleting),
			setup: func(h *harness) {
				recorded(testutil.Claim("ns", "data", uid, "fast", "1Gi"))(h)
				h.csi.Put(volName)
			},
			wantAct:     []string{"get persistentvolumes"},
			wantCreates: 1, wantDeletes: 1, wantVolumes: 0,
		},
		{
			name:  "deleted during provisioning, driver still busy: entry kept, retried",
			claim: testutil.Claim("ns", "data", uid, "fast", "1Gi", deleting),
			setup: func(h *harness) {
				recorded(testutil.Claim("ns", "data", uid, "fast", "1Gi"))(h)
				h.csi.CreateErr = testutil.Code(codes.Aborted)
			},
			wantAct:     []string{"get persistentvolumes"},
			wantCreates: 1, wantEntry: true, wantErr: true,
		},
		{
			name:  "deleted after the PV was made: entry cleared, the PV's reclaim policy handles the volume",
			claim: testutil.Claim("ns", "data", uid, "fast", "1Gi", deleting),
			setup: func(h *harness) {
				recorded(testutil.Claim("ns", "data", uid, "fast", "1Gi"))(h)
				if _, err := h.kube.CoreV1().PersistentVolumes().Create(context.Background(), &v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: volName}}, metav1.CreateOptions{}); err != nil {
					panic(err)
				}
				h.kube.ClearActions()
			},
			wantAct: []string{"get persistentvolumes"},
		},
		{
			name:  "bound to another PV than the one recorded: the recorded volume is undone",
			claim: testutil.Claim("ns", "data", uid, "fast", "1Gi", func(c *v1.PersistentVolumeClaim) { c.Spec.VolumeName = "user-pv" }),
			setup: func(h *harness) {
				recorded(testutil.Claim("ns", "data", uid, "fast", "1Gi"))(h)
				h.csi.Put(volName)
			},
			wantAct:     []string{"get persistentvolumes"},
			wantCreates: 1, wantDeletes: 1,
		},
		{
			name:        "legacy intent of an older Stowage, retried after a timeout: finished and released",
			claim:       testutil.Claim("ns", "data", uid, "fast", "1Gi", withLegacyIntent),
			wantAct:     []string{"create persistentvolumes", "update persistentvolumeclaims"},
			wantCreates: 1, wantVolumes: 1,
		},
		{
			name:  "legacy intent, deleted during provisioning, volume exists: re-create by name to learn its ID, delete it, release",
			claim: testutil.Claim("ns", "data", uid, "fast", "1Gi", withLegacyIntent, deleting),
			setup: func(h *harness) { h.csi.Put(volName) },
			wantAct: []string{
				"get persistentvolumes", "update persistentvolumeclaims",
			},
			wantCreates: 1, wantDeletes: 1, wantVolumes: 0,
		},
		{
			name:        "legacy intent, deleted during provisioning, driver says final error: no volume to delete, release",
			claim:       testutil.Claim("ns", "data", uid, "fast", "1Gi", withLegacyIntent, deleting),
			setup:       func(h *harness) { h.csi.CreateErr = testutil.Code(codes.InvalidArgument) },
			wantAct:     []string{"get persistentvolumes", "update persistentvolumeclaims"},
			wantCreates: 1,
		},
		{
			name:        "legacy intent, deleted during provisioning, driver still busy: keep the intent and retry",
			claim:       testutil.Claim("ns", "data", uid, "fast", "1Gi", withLegacyIntent, deleting),
			setup:       func(h *harness) { h.csi.CreateErr = testutil.Code(codes.Aborted) },
			wantAct:     []string{"get persistentvolumes"},
			wantCreates: 1, wantIntent: true, wantErr: true,
		},
		{
			name:    "legacy intent, deleted after the PV was made: only release, the PV's reclaim policy handles the volume",
			claim:   testutil.Claim("ns", "data", uid, "fast", "1Gi", withLegacyIntent, deleting),
			objs:    []runtime.Object{&v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: volName}}},
			wantAct: []string{"get persistentvolumes", "update persistentvolumeclaims"},
		},
		{
			name:  "deleted without intent: nothing",
			claim: testutil.Claim("ns", "data", uid, "fast", "1Gi", deleting),
		},
		{
			name:  "claim for another driver: nothing",
			claim: testutil.Claim("ns", "data", uid, "fast", "1Gi", func(c *v1.PersistentVolumeClaim) { c.Annotations[annStorageProvisioner] = "other" }),
		},
		{
			name: "beta annotation is honoured",
			claim: testutil.Claim("ns", "data", uid, "fast", "1Gi", func(c *v1.PersistentVolumeClaim) {
				delete(c.Annotations, annStorageProvisioner)
				c.Annotations[annBetaStorageProvisioner] = testutil.Driver
			}),
			wantAct:     []string{"update leases", "create persistentvolumes"},
			wantCreates: 1, wantVolumes: 1,
		},
		{
			name:  "WaitForFirstConsumer without a selected node: wait",
			claim: testutil.Claim("ns", "data", uid, "late", "1Gi"),
			class: testutil.Class("late", nil, testutil.WaitForFirstConsumer),
		},
		{
			name: "populator data source: Event, no CSI call",
			claim: testutil.Claim("ns", "data", uid, "fast", "1Gi", func(c *v1.PersistentVolumeClaim) {
				g := "example.com"
				c.Spec.DataSourceRef = &v1.TypedObjectReference{APIGroup: &g, Kind: "Backup", Name: "b"}
			}),
			wantEvent: []string{"ExternalProvisioning", "Backup.example.com"},
		},
		{
			name:    "PV already exists: release a leftover legacy intent only",
			claim:   testutil.Claim("ns", "data", uid, "fast", "1Gi", withLegacyIntent),
			objs:    []runtime.Object{&v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: volName}}},
			wantAct: []string{"update persistentvolumeclaims"},
		},
		{
			name:        "PV create fails after CreateVolume: the entry stays so the volume is never lost",
			claim:       testutil.Claim("ns", "data", uid, "fast", "1Gi"),
			setup:       func(h *harness) { h.failVerb("create", "persistentvolumes") },
			wantAct:     []string{"update leases", "create persistentvolumes"},
			wantCreates: 1, wantVolumes: 1, wantEntry: true, wantErr: true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.class
			if c == nil {
				c = class
			}
			objs := append([]runtime.Object{tc.claim, c}, tc.objs...)
			h := newHarness(t, defaultConfig(), objs...)
			if tc.setup != nil {
				tc.setup(h)
			}
			err := h.p.SyncClaim(context.Background(), tc.claim.DeepCopy())
			if (err != nil) != tc.wantErr || IsSlow(err) != tc.wantSlow {
				t.Fatalf("err = %v (slow %v), want err %v slow %v", err, IsSlow(err), tc.wantErr, tc.wantSlow)
			}
			if got := h.actions(); !equal(got, tc.wantAct) {
				t.Errorf("API actions = %q, want %q", got, tc.wantAct)
			}
			if len(h.csi.Creates) != tc.wantCreates || len(h.csi.Deletes) != tc.wantDeletes || h.csi.Count() != tc.wantVolumes {
				t.Errorf("CSI creates %d deletes %d volumes %d, want %d %d %d",
					len(h.csi.Creates), len(h.csi.Deletes), h.csi.Count(), tc.wantCreates, tc.wantDeletes, tc.wantVolumes)
			}
			got := h.claim(t, "ns", "data")
			if hasLegacyIntent(got) != tc.wantIntent || (got.Annotations[IntentKey] != "") != tc.wantIntent {
				t.Errorf("intent finalizer %v annotation %q, want intent %v", got.Finalizers, got.Annotations[IntentKey], tc.wantIntent)
			}
			if !slices.Contains(got.Finalizers, "kubernetes.io/pvc-protection") {
				t.Errorf("other finalizers lost: %v", got.Finalizers)
			}
			if _, ok := h.leaseEntries(t)[uid]; ok != tc.wantEntry {
				t.Errorf("journal entry after the sync: %v, want %v", ok, tc.wantEntry)
			}
			ev := h.events()
			for _, want := range tc.wantEvent {
				if !hasEvent(ev, want) {
					t.Errorf("events %q lack %q", ev, want)
				}
			}
			if tc.wantEvent == nil && tc.wantAct == nil && len(ev) > 0 {
				t.Errorf("unexpected events %q", ev)
			}
		})
	}
}

func TestProvisionedPVAndRequest(t *testing.T) {
	retain := v1.PersistentVolumeReclaimRetain
	class := testutil.Class("fast", map[string]string{
		"type": "gp3", fsTypeKey: "xfs",
		"csi.storage.k8s.io/provisioner-secret-name":            "prov-${pvc.annotations['team']}",
		"csi.storage.k8s.io/provisioner-secret-namespace":       "${pvc.namespace}",
		"csi.storage.k8s.io/node-stage-secret-name":             "stage-${pvc.name}",
		"csi.storage.k8s.io/node-stage-secret-namespace":        "${pvc.namespace}",
		"csi.storage.k8s.io/controller-modify-secret-name":      "mod",
		"csi.storage.k8s.io/controller-modify-secret-namespace": "kube-system",
	}, func(c *storagev1.StorageClass) {
		c.ReclaimPolicy = &retain
		c.MountOptions = []string{"noatime"}
	})
	claim := testutil.Claim("ns", "data", uid, "fast", "1Gi", func(c *v1.PersistentVolumeClaim) {
		c.Annotations["team"] = "blue"
		c.Spec.Resources.Limits = v1.ResourceList{v1.ResourceStorage: c.Spec.Resources.Requests[v1.ResourceStorage]}
	})
	secret := &v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "prov-blue"}, Data: map[string][]byte{"key": []byte("v")}}
	cfg := defaultConfig()
	cfg.ExtraCreateMetadata = true
	cfg.Capabilities.Topology = true
	node, csiNode := testutil.Node("n1", map[string]string{"zone": "a"}, "zone")
	h := newHarness(t, cfg, claim, class, secret, node, csiNode)
	h.csi.CreatedTopology = []*csi.Topology{{Segments: map[string]string{"zone": "a"}}}
	if err := h.p.SyncClaim(context.Background(), claim.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	req := h.csi.Creates[0]
	if req.Name != volName || req.CapacityRange.RequiredBytes != 1<<30 || req.CapacityRange.LimitBytes != 1<<30 {
		t.Errorf("name %q capacity %v", req.Name, req.CapacityRange)
	}
	wantParams := map[string]string{"type": "gp3", metaPVCName: "data", metaPVCNamespace: "ns", metaPVName: volName}
	if len(req.Parameters) != len(wantParams) {
		t.Errorf("parameters %v, want %v (every csi.storage.k8s.io key stripped, metadata added)", req.Parameters, wantParams)
	}
	for k, v := range wantParams {
		if req.Parameters[k] != v {
			t.Errorf("parameter %s = %q, want %q", k, req.Parameters[k], v)
		}
	}
	if req.Secrets["key"] != "v" {
		t.Errorf("provisioner secret not passed: %v", req.Secrets)
	}
	m := req.VolumeCapabilities[0].GetMount()
	if m.GetFsType() != "xfs" || !slices.Equal(m.GetMountFlags(), []string{"noatime"}) {
		t.Errorf("mount capability %v", m)
	}
	if len(req.AccessibilityRequirements.GetRequisite()) != 1 {
		t.Errorf("immediate topology requisite %v", req.AccessibilityRequirements)
	}

	pv := h.pv(t, volName)
	if !slices.Equal(pv.Finalizers, []string{VolumeFinalizer}) || pv.Annotations[annProvisionedBy] != testutil.Driver {
		t.Errorf("PV finalizers %v annotations %v", pv.Finalizers, pv.Annotations)
	}
	if pv.Annotations[annDeletionSecretName] != "prov-blue" || pv.Annotations[annDeletionSecretNS] != "ns" {
		t.Errorf("deletion secret annotations %v", pv.Annotations)
	}
	if pv.Annotations[annModifySecretName] != "mod" || pv.Annotations[annModifySecretNS] != "kube-system" {
		t.Errorf("modify secret annotations %v", pv.Annotations)
	}
	src := pv.Spec.CSI
	if src.VolumeHandle != "vol-0001" || src.FSType != "xfs" || src.VolumeAttributes[provisionerIdentityKey] != "id-1" || src.VolumeAttributes["fake/name"] != volName {
		t.Errorf("CSI source %+v", src)
	}
	if src.NodeStageSecretRef == nil || src.NodeStageSecretRef.Name != "stage-data" || src.NodeStageSecretRef.Namespace != "ns" {
		t.Errorf("node stage secret ref %v", src.NodeStageSecretRef)
	}
	if pv.Spec.PersistentVolumeReclaimPolicy != retain || pv.Spec.StorageClassName != "fast" || !slices.Equal(pv.Spec.MountOptions, []string{"noatime"}) {
		t.Errorf("PV spec %+v", pv.Spec)
	}
	if r := pv.Spec.ClaimRef; r == nil || r.UID != claim.UID || r.Name != "data" || r.Namespace != "ns" {
		t.Errorf("claimRef %v", r)
	}
	terms := pv.Spec.NodeAffinity.Required.NodeSelectorTerms
	if len(terms) != 1 || terms[0].MatchExpressions[0].Key != "zone" || terms[0].MatchExpressions[0].Values[0] != "a" {
		t.Errorf("node affinity %v", terms)
	}
}

func TestWaitForFirstConsumerUsesSelectedNodeTopology(t *testing.T) {
	cfg := defaultConfig()
	cfg.Capabilities.Topology = true
	class := testutil.Class("late", nil, testutil.WaitForFirstConsumer)
	claim := testutil.Claim("ns", "data", uid, "late", "1Gi", func(c *v1.PersistentVolumeClaim) { c.Annotations[annSelectedNode] = "n2" })
	n1, cn1 := testutil.Node("n1", map[string]string{"zone": "a", "rack": "1"}, "zone")
	n2, cn2 := testutil.Node("n2", map[string]string{"zone": "b"}, "zone")
	n3, cn3 := testutil.Node("n3", map[string]string{"zone": "c"}, "zone")
	for _, strict := range []bool{false, true} {
		cfg.StrictTopology = strict
		h := newHarness(t, cfg, claim, class, n1, cn1, n2, cn2, n3, cn3)
		if err := h.p.SyncClaim(context.Background(), claim.DeepCopy()); err != nil {
			t.Fatal(err)
		}
		tr := h.csi.Creates[0].AccessibilityRequirements
		if tr.Preferred[0].Segments["zone"] != "b" {
			t.Errorf("strict=%v: preferred %v does not start with the selected node's zone", strict, tr.Preferred)
		}
		wantReq := 3
		if strict {
			wantReq = 1
		}
		if len(tr.Requisite) != wantReq || len(tr.Preferred) != wantReq {
			t.Errorf("strict=%v: requisite %v preferred %v, want %d each", strict, tr.Requisite, tr.Preferred, wantReq)
		}
	}
}

func TestResourceExhaustedReschedulesInOneWrite(t *testing.T) {
	cfg := defaultConfig()
	cfg.Capabilities.Topology = true
	class := testutil.Class("late", nil, testutil.WaitForFirstConsumer)
	claim := testutil.Claim("ns", "data", uid, "late", "1Gi", func(c *v1.PersistentVolumeClaim) { c.Annotations[annSelectedNode] = "n1" })
	n1, cn1 := testutil.Node("n1", map[string]string{"zone": "a"}, "zone")
	h := newHarness(t, cfg, claim, class, n1, cn1)
	h.csi.CreateErr = testutil.Code(codes.ResourceExhausted)
	if err := h.p.SyncClaim(context.Background(), claim.DeepCopy()); err == nil {
		t.Fatal("no error")
	}
	if got, want := h.actions(), []string{"update leases", "update persistentvolumeclaims"}; !equal(got, want) {
		t.Errorf("actions %q, want %q (record entry, then one reschedule update)", got, want)
	}
	if _, ok := h.leaseEntries(t)[uid]; ok {
		t.Error("entry left in the journal for a volume the driver did not make")
	}
	got := h.claim(t, "ns", "data")
	if _, ok := got.Annotations[annSelectedNode]; ok || hasLegacyIntent(got) {
		t.Errorf("selected node or intent left: %v %v", got.Annotations, got.Finalizers)
	}
}

// boundSource is a clone source: claim ns/src of the given size, bound to PV pv-src of volume vol-src.
func boundSource(size string) (*v1.PersistentVolumeClaim, *v1.PersistentVolume) {
	src := testutil.Claim("ns", "src", "src-uid", "fast", size, func(c *v1.PersistentVolumeClaim) {
		c.Spec.VolumeName = "pv-src"
		c.Status.Phase = v1.ClaimBound
	})
	return src, &v1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "pv-src"},
		Spec: v1.PersistentVolumeSpec{
			Capacity:               v1.ResourceList{v1.ResourceStorage: src.Spec.Resources.Requests[v1.ResourceStorage]},
			ClaimRef:               &v1.ObjectReference{UID: src.UID},
			PersistentVolumeSource: v1.PersistentVolumeSource{CSI: &v1.CSIPersistentVolumeSource{Driver: testutil.Driver, VolumeHandle: "vol-src"}},
		},
	}
}

func TestCloneProtectsAndReleasesSource(t *testing.T) {
	class := testutil.Class("fast", nil)
	src, srcPV := boundSource("1Gi")
	clone := testutil.Claim("ns", "data", uid, "fast", "1Gi", func(c *v1.PersistentVolumeClaim) {
		c.Spec.DataSource = &v1.TypedLocalObjectReference{Kind: "PersistentVolumeClaim", Name: "src"}
	})
	h := newHarness(t, defaultConfig(), class, src, srcPV, clone)
	if err := h.p.SyncClaim(context.Background(), clone.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	if cs := h.csi.Creates[0].VolumeContentSource.GetVolume(); cs.GetVolumeId() != "vol-src" {
		t.Errorf("content source %v", cs)
	}
	want := []string{
		"update leases",                 // record entry of the clone
		"update persistentvolumeclaims", // cloning-protection on the source
		"create persistentvolumes",
	}
	if got := h.actions(); !equal(got, want) {
		t.Errorf("actions %q, want %q", got, want)
	}
	if got := h.claim(t, "ns", "src"); !slices.Contains(got.Finalizers, CloneFinalizer) {
		t.Errorf("source finalizers %v lack %s", got.Finalizers, CloneFinalizer)
	}
	// Once the cache sees the clone bound, the protection goes.
	h.cache(t, h.claim(t, "ns", "src"))
	bound := h.claim(t, "ns", "data")
	bound.Spec.VolumeName = volName
	if err := h.indexer["pvc"].Update(bound); err != nil {
		t.Fatal(err)
	}
	if err := h.indexer["pvc"].Update(h.claim(t, "ns", "src")); err != nil {
		t.Fatal(err)
	}
	if err := h.p.SyncCloneSource(context.Background(), "ns", "src"); err != nil {
		t.Fatal(err)
	}
	if got := h.claim(t, "ns", "src"); slices.Contains(got.Finalizers, CloneFinalizer) {
		t.Errorf("cloning protection not released: %v", got.Finalizers)
	}
}

func TestCloneRejectsSmallerOrOtherMode(t *testing.T) {
	block := v1.PersistentVolumeBlock
	class := testutil.Class("fast", nil)
	src, srcPV := boundSource("2Gi")
	for name, mod := range map[string]func(*v1.PersistentVolumeClaim){
		"smaller":    func(c *v1.PersistentVolumeClaim) {},
		"block mode": func(c *v1.PersistentVolumeClaim) { c.Spec.VolumeMode = &block; c.Spec.Resources = src.Spec.Resources },
	} {
		clone := testutil.Claim("ns", "data", uid, "fast", "1Gi", func(c *v1.PersistentVolumeClaim) {
			c.Spec.DataSource = &v1.TypedLocalObjectReference{Kind: "PersistentVolumeClaim", Name: "src"}
		}, mod)
		h := newHarness(t, defaultConfig(), class, src, srcPV, clone)
		err := h.p.SyncClaim(context.Background(), clone.DeepCopy())
		if !IsSlow(err) || len(h.actions()) != 0 || len(h.csi.Creates) != 0 {
			t.Errorf("%s: err %v actions %q creates %d; want a slow error and nothing done", name, err, h.actions(), len(h.csi.Creates))
		}
	}
}

// The informer hands the claim back after our own writes, often before its cache shows them: the stale copies
// must not repeat CreateVolume, the PV create or the release.
func TestSyncClaimStaleCopiesDoNothing(t *testing.T) {
	claim := testutil.Claim("ns", "data", uid, "fast", "1Gi")
	h := newHarness(t, defaultConfig(), claim, testutil.Class("fast", nil))
	if err := h.p.SyncClaim(context.Background(), claim.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	stale := claim.DeepCopy()
	withLegacyIntent(stale)
	for _, c := range []*v1.PersistentVolumeClaim{claim, stale} {
		if err := h.p.SyncClaim(context.Background(), c.DeepCopy()); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := h.actions(), []string{"update leases", "create persistentvolumes"}; !equal(got, want) {
		t.Errorf("actions %q, want %q", got, want)
	}
	if len(h.csi.Creates) != 1 {
		t.Errorf("CreateVolume called %d times", len(h.csi.Creates))
	}
}

func TestNodeDeployment(t *testing.T) {
	cfg := defaultConfig()
	cfg.NodeName = "n1"
	cfg.NodeDeploymentImmediateBinding = true
	other := testutil.Claim("ns", "data", uid, "fast", "1Gi", func(c *v1.PersistentVolumeClaim) { c.Annotations[annSelectedNode] = "n2" })
	h := newHarness(t, cfg, other, testutil.Class("fast", nil))
	if err := h.p.SyncClaim(context.Background(), other.DeepCopy()); err != nil || len(h.actions()) != 0 {
		t.Fatalf("claim selected for another node: err %v actions %q", err, h.actions())
	}
	free := testutil.Claim("ns", "free", "free-uid", "fast", "1Gi")
	h = newHarness(t, cfg, free, testutil.Class("fast", nil))
	if err := h.p.SyncClaim(context.Background(), free.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	if got := h.claim(t, "ns", "free"); got.Annotations[annSelectedNode] != "n1" || len(h.csi.Creates) != 0 {
		t.Errorf("immediate claim not taken for the node: %v", got.Annotations)
	}
	// A competitor that read the same version must lose the race: the Update carries the resourceVersion read.
	take := h.kube.Actions()[0].(k8stesting.UpdateAction)
	if rv := take.GetObject().(*v1.PersistentVolumeClaim).ResourceVersion; take.GetVerb() != "update" || rv != free.ResourceVersion || rv == "" {
		t.Errorf("take %s carries resourceVersion %q, want the one read, %q", take.GetVerb(), rv, free.ResourceVersion)
	}
	// The fake checks that precondition like the API server: another node's instance with the same copy loses.
	rivalCfg := cfg
	rivalCfg.NodeName = "n2"
	rival := New(rivalCfg, h.p.Deps)
	if err := rival.SyncClaim(context.Background(), free.DeepCopy()); !apierrors.IsConflict(err) {
		t.Errorf("rival take with the same copy: err %v, want a conflict", err)
	}
	if got := h.claim(t, "ns", "free"); got.Annotations[annSelectedNode] != "n1" {
		t.Errorf("rival overwrote the taken claim: selected-node %q", got.Annotations[annSelectedNode])
	}
}

// The recorded name wins over the one the current flags would make, so a restart with another
// --volume-name-prefix still finds the volume an earlier run may have made.
func TestAbandonUsesRecordedVolumeName(t *testing.T) {
	claim := testutil.Claim("ns", "data", uid, "fast", "1Gi", withLegacyIntent, deleting, func(c *v1.PersistentVolumeClaim) {
		c.Annotations[IntentKey] = "old-prefix-" + uid
	})
	h := newHarness(t, defaultConfig(), claim, testutil.Class("fast", nil))
	h.csi.Put("old-prefix-" + uid)
	if err := h.p.SyncClaim(context.Background(), claim.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	if len(h.csi.Creates) != 1 || h.csi.Creates[0].Name != "old-prefix-"+uid || h.csi.Count() != 0 {
		t.Errorf("creates %d (name %q), volumes left %d", len(h.csi.Creates), h.csi.Creates[0].Name, h.csi.Count())
	}
}

// The intent release follows the PV create, on which the PV controller binds the claim: the copy in hand is then
// older than the stored claim. The release is an Update guarded by the resourceVersion read, so it fails with
// 409 Conflict and changes nothing (it must not undo the binding); the retry from the bound copy releases.
func TestIntentReleaseAfterTheBinderWrite(t *testing.T) {
	claim := testutil.Claim("ns", "data", uid, "fast", "1Gi", withLegacyIntent)
	h := newHarness(t, defaultConfig(), claim, testutil.Class("fast", nil))
	bound := h.claim(t, "ns", "data")
	bound.Spec.VolumeName = volName
	if _, err := h.kube.CoreV1().PersistentVolumeClaims("ns").Update(context.Background(), bound, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.kube.ClearActions()
	if err := h.p.finishProvisioning(context.Background(), claim.DeepCopy()); !apierrors.IsConflict(err) {
		t.Fatalf("release with the pre-binding copy: err %v, want a conflict", err)
	}
	if got := h.claim(t, "ns", "data"); !hasLegacyIntent(got) || got.Spec.VolumeName != volName {
		t.Fatalf("the stale release changed the claim: finalizers %v, volumeName %q", got.Finalizers, got.Spec.VolumeName)
	}
	if h.p.claimStage(claim) == claimReleased {
		t.Fatal("a failed release was recorded as done")
	}
	fresh := h.claim(t, "ns", "data")
	h.kube.ClearActions()
	if err := h.p.SyncClaim(context.Background(), fresh); err != nil {
		t.Fatalf("retry from the bound copy: %v", err)
	}
	if got, want := h.actions(), []string{"update persistentvolumeclaims"}; !equal(got, want) {
		t.Errorf("actions %q, want %q", got, want)
	}
	got := h.claim(t, "ns", "data")
	if slices.Contains(got.Finalizers, IntentKey) || got.Annotations[IntentKey] != "" || got.Spec.VolumeName != volName {
		t.Errorf("after the release: finalizers %v, intent annotation %q, volumeName %q", got.Finalizers, got.Annotations[IntentKey], got.Spec.VolumeName)
	}
}
