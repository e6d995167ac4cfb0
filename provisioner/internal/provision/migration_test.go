package provision

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stowage-csi/stowage/provisioner/internal/testutil"
	"github.com/stowage-csi/stowage/shared/csiconn"
)

// The migration pair csi-translation-lib knows for AWS EBS.
const (
	ebsDriver = "ebs.csi.aws.com"
	ebsInTree = "kubernetes.io/aws-ebs"
)

func ebsConfig() Config {
	cfg := defaultConfig()
	cfg.DriverName = ebsDriver
	return cfg
}

// migratedClaim is a claim of an in-tree class handed to the CSI driver, with both annotations upstream accepts
// naming the driver. (kube-controller-manager 1.36 writes only storage-provisioner: see the "no migrated-to" case
// and TestE2EProvisionerMigration.)
func migratedClaim(opts ...func(*v1.PersistentVolumeClaim)) *v1.PersistentVolumeClaim {
	c := testutil.Claim("ns", "data", uid, "gp", "1Gi", func(c *v1.PersistentVolumeClaim) {
		c.Annotations[annStorageProvisioner] = ebsDriver
		c.Annotations[annMigratedTo] = ebsDriver
	})
	for _, o := range opts {
		o(c)
	}
	return c
}

func inTreeClass(params map[string]string, opts ...func(*storagev1.StorageClass)) *storagev1.StorageClass {
	return testutil.Class("gp", params, append([]func(*storagev1.StorageClass){func(c *storagev1.StorageClass) { c.Provisioner = ebsInTree }}, opts...)...)
}

func TestSyncClaimMigration(t *testing.T) {
	params := map[string]string{"type": "gp3", "fsType": "xfs", "iopsPerGB": "10", "encrypted": "true"}
	zone := []*csi.Topology{{Segments: map[string]string{"topology.ebs.csi.aws.com/zone": "us-east-1a"}}}
	tests := []struct {
		name    string
		cfg     Config
		claim   *v1.PersistentVolumeClaim
		class   *storagev1.StorageClass
		wantAct []string
		// wantParams is the CreateVolume request's parameters, wantFSType its mount capability's fsType; both are
		// checked only when a CreateVolume is expected.
		wantParams  map[string]string
		wantFSType  string
		wantCreates int
		// wantCSIPV: the driver's own class, so a CSI PV and calls not marked migrated; otherwise a created
		// volume's PV is in-tree and its calls are marked.
		wantCSIPV bool
		wantErr   bool
		wantSlow  bool
		wantEvent []string
	}{
		{
			name:    "claim migrated to the driver: CreateVolume with translated parameters, PV written in-tree",
			cfg:     ebsConfig(),
			claim:   migratedClaim(),
			class:   inTreeClass(params),
			wantAct: []string{"update leases", "create persistentvolumes"},
			// fsType moves to the capability; iopsPerGB brings allowAutoIOPSPerGBIncrease (csi-translation-lib writes the
			// key in lower case; the EBS driver reads keys case-insensitively), as the in-tree plugin behaved.
			wantParams:  map[string]string{"type": "gp3", "iopsPerGB": "10", "allowautoiopspergbincrease": "true", "encrypted": "true"},
			wantFSType:  "xfs",
			wantCreates: 1,
			wantEvent:   []string{"ProvisioningSucceeded"},
		},
		{
			name: "as kube-controller-manager 1.36 hands it over: storage-provisioner names the driver, no migrated-to",
			cfg:  ebsConfig(),
			claim: migratedClaim(func(c *v1.PersistentVolumeClaim) {
				delete(c.Annotations, annMigratedTo)
			}),
			class:       inTreeClass(params),
			wantAct:     []string{"update leases", "create persistentvolumes"},
			wantParams:  map[string]string{"type": "gp3", "iopsPerGB": "10", "allowautoiopspergbincrease": "true", "encrypted": "true"},
			wantFSType:  "xfs",
			wantCreates: 1,
		},
		{
			name: "storage-provisioner names the in-tree plugin, migrated-to the driver",
			cfg:  ebsConfig(),
			claim: migratedClaim(func(c *v1.PersistentVolumeClaim) {
				c.Annotations[annStorageProvisioner] = ebsInTree
			}),
			class:       inTreeClass(params),
			wantAct:     []string{"update leases", "create persistentvolumes"},
			wantParams:  map[string]string{"type": "gp3", "iopsPerGB": "10", "allowautoiopspergbincrease": "true", "encrypted": "true"},
			wantFSType:  "xfs",
			wantCreates: 1,
		},
		{
			name: "in-tree claim not migrated (no migrated-to): ignored",
			cfg:  ebsConfig(),
			claim: migratedClaim(func(c *v1.PersistentVolumeClaim) {
				c.Annotations[annStorageProvisioner] = ebsInTree
				delete(c.Annotations, annMigratedTo)
			}),
			class: inTreeClass(params),
		},
		{
			name: "claim migrated to another driver: ignored",
			cfg:  ebsConfig(),
			claim: migratedClaim(func(c *v1.PersistentVolumeClaim) {
				c.Annotations[annStorageProvisioner] = ebsInTree
				c.Annotations[annMigratedTo] = "other.csi.example.com"
			}),
			class: inTreeClass(params),
		},
		{
			name: "driver no in-tree plugin migrates to: an in-tree class is not its own",
			cfg:  defaultConfig(),
			claim: migratedClaim(func(c *v1.PersistentVolumeClaim) {
				c.Annotations[annStorageProvisioner] = testutil.Driver
				c.Annotations[annMigratedTo] = testutil.Driver
			}),
			class: inTreeClass(params),
		},
		{
			name:        "the driver's own class: nothing translated, CSI PV, calls not marked migrated",
			cfg:         ebsConfig(),
			claim:       migratedClaim(func(c *v1.PersistentVolumeClaim) { delete(c.Annotations, annMigratedTo) }),
			class:       inTreeClass(map[string]string{"type": "gp3", "fsType": "xfs"}, func(c *storagev1.StorageClass) { c.Provisioner = ebsDriver }),
			wantAct:     []string{"update leases", "create persistentvolumes"},
			wantParams:  map[string]string{"type": "gp3", "fsType": "xfs"},
			wantFSType:  "xfs",
			wantCreates: 1,
			wantCSIPV:   true,
		},
		{
			name:  "class of another in-tree plugin: ignored",
			cfg:   ebsConfig(),
			claim: migratedClaim(),
			class: inTreeClass(params, func(c *storagev1.StorageClass) { c.Provisioner = "kubernetes.io/gce-pd" }),
		},
		{
			name:  "untranslatable class (zone and allowedTopologies): Event, no write, no CSI call, slow retry",
			cfg:   ebsConfig(),
			claim: migratedClaim(),
			class: inTreeClass(map[string]string{"zone": "us-east-1a"}, func(c *storagev1.StorageClass) {
				c.AllowedTopologies = []v1.TopologySelectorTerm{{MatchLabelExpressions: []v1.TopologySelectorLabelRequirement{
					{Key: "topology.kubernetes.io/zone", Values: []string{"us-east-1b"}},
				}}}
			}),
			wantErr: true, wantSlow: true,
			wantEvent: []string{"ProvisioningFailed", "translating StorageClass"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, tc.cfg, tc.claim, tc.class)
			h.csi.CreatedTopology = zone
			marks := &markingCSI{FakeCSI: h.csi}
			h.p.CSI = marks
			err := h.p.SyncClaim(context.Background(), tc.claim.DeepCopy())
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if err != nil && IsSlow(err) != tc.wantSlow {
				t.Errorf("slow = %v, want %v", IsSlow(err), tc.wantSlow)
			}
			if got := h.actions(); !equal(got, tc.wantAct) {
				t.Errorf("actions %q, want %q", got, tc.wantAct)
			}
			if len(h.csi.Creates) != tc.wantCreates {
				t.Fatalf("CreateVolume calls %d, want %d", len(h.csi.Creates), tc.wantCreates)
			}
			events := h.events()
			for _, e := range tc.wantEvent {
				if !hasEvent(events, e) {
					t.Errorf("no event containing %q in %q", e, events)
				}
			}
			if tc.wantCreates == 0 {
				return
			}
			req := h.csi.Creates[0]
			if !maps.Equal(req.Parameters, tc.wantParams) {
				t.Errorf("CreateVolume parameters %v, want %v", req.Parameters, tc.wantParams)
			}
			if got := req.VolumeCapabilities[0].GetMount().GetFsType(); got != tc.wantFSType {
				t.Errorf("CreateVolume fsType %q, want %q", got, tc.wantFSType)
			}
			if want := !tc.wantCSIPV; !slices.Equal(marks.creates, []bool{want}) {
				t.Errorf("CreateVolume calls marked migrated %v, want [%v]", marks.creates, want)
			}
			if tc.wantCSIPV {
				if pv := h.pv(t, volName); pv.Spec.CSI == nil || pv.Annotations[annProvisionedBy] != ebsDriver {
					t.Errorf("PV source %+v provisioned-by %q, want CSI and %s", pv.Spec.PersistentVolumeSource, pv.Annotations[annProvisionedBy], ebsDriver)
				}
				return
			}
			checkInTreePV(t, h, h.pv(t, volName))
		})
	}
}

// checkInTreePV asserts the PV made for a migrated claim is in the in-tree plugin's form, as upstream writes it,
// and that the provisioner still recognises it as its own (so it deletes it later).
func checkInTreePV(t *testing.T, h *harness, pv *v1.PersistentVolume) {
	t.Helper()
	if pv.Spec.CSI != nil {
		t.Errorf("PV has a CSI source %+v, want none", pv.Spec.CSI)
	}
	want := &v1.AWSElasticBlockStoreVolumeSource{VolumeID: "vol-0001", FSType: "xfs"}
	if got := pv.Spec.AWSElasticBlockStore; got == nil || *got != *want {
		t.Errorf("PV awsElasticBlockStore %+v, want %+v", got, want)
	}
	if got := pv.Annotations[annProvisionedBy]; got != ebsInTree {
		t.Errorf("PV provisioned-by %q, want %q", got, ebsInTree)
	}
	if !slices.Contains(pv.Finalizers, VolumeFinalizer) {
		t.Errorf("PV finalizers %v lack %s", pv.Finalizers, VolumeFinalizer)
	}
	// The CSI zone key becomes the well-known in-tree one.
	terms := pv.Spec.NodeAffinity.Required.NodeSelectorTerms
	var keys []string
	for _, term := range terms {
		for _, e := range term.MatchExpressions {
			keys = append(keys, e.Key+"="+strings.Join(e.Values, ","))
		}
	}
	if !slices.Contains(keys, "topology.kubernetes.io/zone=us-east-1a") {
		t.Errorf("PV node affinity %v, want topology.kubernetes.io/zone=us-east-1a", keys)
	}
	if pv.Spec.StorageClassName != "gp" || pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.UID != uid {
		t.Errorf("PV class %q claimRef %+v, want class gp and the claim", pv.Spec.StorageClassName, pv.Spec.ClaimRef)
	}
	if !h.p.IsOursPV(pv) {
		t.Errorf("the provisioner does not recognise the PV it wrote in-tree as its own")
	}
}

// inTreePV is a released PV of the in-tree EBS plugin, as the in-tree plugin (or upstream, for a migrated claim)
// left it.
func inTreePV(opts ...func(*v1.PersistentVolume)) *v1.PersistentVolume {
	pv := &v1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{
			Name: volName, UID: "pv-uid",
			Annotations: map[string]string{annProvisionedBy: ebsInTree, annMigratedTo: ebsDriver},
			Finalizers:  []string{"kubernetes.io/pv-protection", VolumeFinalizer},
		},
		Spec: v1.PersistentVolumeSpec{
			PersistentVolumeReclaimPolicy: v1.PersistentVolumeReclaimDelete,
			StorageClassName:              "gp",
			PersistentVolumeSource: v1.PersistentVolumeSource{AWSElasticBlockStore: &v1.AWSElasticBlockStoreVolumeSource{
				VolumeID: "aws://us-east-1a/vol-0abc", FSType: "ext4",
			}},
		},
		Status: v1.PersistentVolumeStatus{Phase: v1.VolumeReleased},
	}
	for _, o := range opts {
		o(pv)
	}
	return pv
}

func TestSyncVolumeMigration(t *testing.T) {
	tests := []struct {
		name        string
		cfg         Config
		pv          *v1.PersistentVolume
		wantAct     []string
		wantDeletes []string // DeleteVolume volume IDs
		wantFinal   bool     // our finalizer on the PV afterwards (if it is still there)
	}{
		{
			name:        "released in-tree PV: delete PV, DeleteVolume with the translated handle, drop finalizer",
			cfg:         ebsConfig(),
			pv:          inTreePV(),
			wantAct:     []string{"delete persistentvolumes", "patch persistentvolumes"},
			wantDeletes: []string{"vol-0abc"},
		},
		{
			name: "made by the in-tree plugin (no finalizer of ours), marked migrated-to: DeleteVolume, then PV deleted",
			cfg:  ebsConfig(),
			pv: inTreePV(func(pv *v1.PersistentVolume) {
				pv.Finalizers = []string{"kubernetes.io/pv-protection"}
			}),
			wantAct:     []string{"delete persistentvolumes"},
			wantDeletes: []string{"vol-0abc"},
		},
		{
			name: "bound in-tree PV provisioned dynamically, without our finalizer: the finalizer is added",
			cfg:  ebsConfig(),
			pv: inTreePV(func(pv *v1.PersistentVolume) {
				pv.Finalizers = nil
				pv.Status.Phase = v1.VolumeBound
			}),
			wantAct:   []string{"patch persistentvolumes"},
			wantFinal: true,
		},
		{
			name: "static in-tree PV (no provisioned-by, no migrated-to): left alone",
			cfg:  ebsConfig(),
			pv: inTreePV(func(pv *v1.PersistentVolume) {
				pv.Annotations = nil
				pv.Finalizers = nil
			}),
		},
		{
			name: "in-tree PV of another plugin: left alone",
			cfg:  ebsConfig(),
			pv: inTreePV(func(pv *v1.PersistentVolume) {
				pv.Annotations[annProvisionedBy] = "kubernetes.io/gce-pd"
				pv.Annotations[annMigratedTo] = "pd.csi.storage.gke.io"
				pv.Spec.AWSElasticBlockStore = nil
				pv.Spec.GCEPersistentDisk = &v1.GCEPersistentDiskVolumeSource{PDName: "disk"}
			}),
			wantFinal: true,
		},
		{
			name:      "driver no in-tree plugin migrates to: in-tree EBS PV left alone",
			cfg:       defaultConfig(),
			pv:        inTreePV(),
			wantFinal: true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, tc.cfg, tc.pv)
			marks := &markingCSI{FakeCSI: h.csi}
			h.p.CSI = marks
			if err := h.p.SyncVolume(context.Background(), tc.pv.DeepCopy()); err != nil {
				t.Fatal(err)
			}
			if got := h.actions(); !equal(got, tc.wantAct) {
				t.Errorf("actions %q, want %q", got, tc.wantAct)
			}
			var ids []string
			for _, d := range h.csi.Deletes {
				ids = append(ids, d.VolumeId)
			}
			if !slices.Equal(ids, tc.wantDeletes) {
				t.Errorf("DeleteVolume IDs %q, want %q", ids, tc.wantDeletes)
			}
			for i, m := range marks.deletes {
				if !m {
					t.Errorf("DeleteVolume call %d for an in-tree PV not marked migrated", i)
				}
			}
			pv, err := h.kube.CoreV1().PersistentVolumes().Get(context.Background(), volName, metav1.GetOptions{})
			if err == nil && slices.Contains(pv.Finalizers, VolumeFinalizer) != tc.wantFinal {
				t.Errorf("finalizers %v, want ours %v", pv.Finalizers, tc.wantFinal)
			}
		})
	}
}

// A migrated claim provisioned and then released goes full circle: the in-tree PV it got is deleted through the
// driver by the volume ID CreateVolume returned.
func TestMigrationRoundTrip(t *testing.T) {
	claim := migratedClaim()
	h := newHarness(t, ebsConfig(), claim, inTreeClass(map[string]string{"type": "gp3"}))
	if err := h.p.SyncClaim(context.Background(), claim.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	pv := h.pv(t, volName)
	pv.Status.Phase = v1.VolumeReleased
	if err := h.p.SyncVolume(context.Background(), pv); err != nil {
		t.Fatal(err)
	}
	if h.csi.Count() != 0 || len(h.csi.Deletes) != 1 || h.csi.Deletes[0].VolumeId != "vol-0001" {
		t.Fatalf("driver holds %d volumes after DeleteVolume calls %v, want none after one for vol-0001", h.csi.Count(), h.csi.Deletes)
	}
}

// markingCSI records, per call, whether the call's context was marked migrated (the migrated label of
// csi_sidecar_operations_seconds, as upstream sets it).
type markingCSI struct {
	*testutil.FakeCSI
	creates, deletes []bool
}

func (m *markingCSI) CreateVolume(ctx context.Context, req *csi.CreateVolumeRequest, opts ...grpc.CallOption) (*csi.CreateVolumeResponse, error) {
	m.creates = append(m.creates, csiconn.IsMigrated(ctx))
	return m.FakeCSI.CreateVolume(ctx, req, opts...)
}

func (m *markingCSI) DeleteVolume(ctx context.Context, req *csi.DeleteVolumeRequest, opts ...grpc.CallOption) (*csi.DeleteVolumeResponse, error) {
	m.deletes = append(m.deletes, csiconn.IsMigrated(ctx))
	return m.FakeCSI.DeleteVolume(ctx, req, opts...)
}
