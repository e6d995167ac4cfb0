package provision

import (
	"context"
	"maps"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stowage-csi/stowage/provisioner/internal/testutil"
)

// VolumeAttributesClasses are read with GET (upstream's RBAC grants get only), and one GET serves the claims
// that name the class until the copy is older than the TTL.
func TestAttributesClassIsReadWithGetAndCached(t *testing.T) {
	gold := &storagev1.VolumeAttributesClass{
		ObjectMeta: metav1.ObjectMeta{Name: "gold"}, DriverName: testutil.Driver, Parameters: map[string]string{"iops": "3000"},
	}
	withGold := func(c *v1.PersistentVolumeClaim) { c.Spec.VolumeAttributesClassName = new("gold") }
	claims := []*v1.PersistentVolumeClaim{
		testutil.Claim("ns", "a", "uid-a", "fast", "1Gi", withGold),
		testutil.Claim("ns", "b", "uid-b", "fast", "1Gi", withGold),
		testutil.Claim("ns", "c", "uid-c", "fast", "1Gi", withGold),
	}
	cfg := defaultConfig()
	cfg.AttrClassesServed = true
	cfg.Capabilities.ModifyVolume = true
	h := newHarness(t, cfg, claims[0], claims[1], claims[2], testutil.Class("fast", nil), gold)
	now := time.Unix(1000, 0)
	h.p.attrClasses.now = func() time.Time { return now }

	// wantGets is the number of GETs of the class after each claim: the third comes after the TTL.
	for i, wantGets := range []int{1, 1, 2} {
		if i == 2 {
			now = now.Add(attrClassTTL + time.Second)
		}
		if err := h.p.SyncClaim(context.Background(), claims[i].DeepCopy()); err != nil {
			t.Fatalf("claim %s: %v", claims[i].Name, err)
		}
		if got := h.csi.Creates[i].MutableParameters; !maps.Equal(got, gold.Parameters) {
			t.Errorf("claim %s: mutable_parameters %v, want %v", claims[i].Name, got, gold.Parameters)
		}
		var gets int
		for _, a := range h.actions() {
			switch a {
			case "get volumeattributesclasses":
				gets++
			case "list volumeattributesclasses", "watch volumeattributesclasses":
				t.Errorf("claim %s: %s, which upstream's RBAC does not grant", claims[i].Name, a)
			}
		}
		if gets != wantGets {
			t.Errorf("after claim %s: %d GETs of the class, want %d (actions %q)", claims[i].Name, gets, wantGets, h.actions())
		}
		if pv := h.pv(t, "pvc-"+string(claims[i].UID)); pv.Spec.VolumeAttributesClassName == nil || *pv.Spec.VolumeAttributesClassName != "gold" {
			t.Errorf("PV of claim %s: volumeAttributesClassName %v", claims[i].Name, pv.Spec.VolumeAttributesClassName)
		}
	}
}

// A class that does not exist yet is not remembered: once it is created the next try finds it.
func TestAttributesClassMissIsNotCached(t *testing.T) {
	claim := testutil.Claim("ns", "a", "uid-a", "fast", "1Gi", func(c *v1.PersistentVolumeClaim) { c.Spec.VolumeAttributesClassName = new("gold") })
	cfg := defaultConfig()
	cfg.AttrClassesServed = true
	cfg.Capabilities.ModifyVolume = true
	h := newHarness(t, cfg, claim, testutil.Class("fast", nil))
	if err := h.p.SyncClaim(context.Background(), claim.DeepCopy()); err == nil || len(h.csi.Creates) != 0 {
		t.Fatalf("missing class: err %v, CreateVolume calls %d", err, len(h.csi.Creates))
	}
	if slices.Contains(h.actions(), "update persistentvolumeclaims") || slices.Contains(h.actions(), "update leases") {
		t.Errorf("a claim whose class is missing was written, or recorded: %q", h.actions())
	}
	gold := &storagev1.VolumeAttributesClass{ObjectMeta: metav1.ObjectMeta{Name: "gold"}, DriverName: testutil.Driver}
	if _, err := h.kube.StorageV1().VolumeAttributesClasses().Create(context.Background(), gold, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := h.p.SyncClaim(context.Background(), claim.DeepCopy()); err != nil || len(h.csi.Creates) != 1 {
		t.Fatalf("class created: err %v, CreateVolume calls %d", err, len(h.csi.Creates))
	}
}

// The VolumeAttributesClass gate decides what a claim naming a class gets. Off (set, or by ENABLE_VAC_FALLBACK
// with the API not served), the class is ignored as upstream ignores it: the claim is provisioned with the
// ordinary writes, no mutable_parameters, no class on the PV, no GET of the class, and no MODIFY_VOLUME needed.
// On with the API not served, the claim fails slowly without a request.
func TestAttributesClassGate(t *testing.T) {
	gold := &storagev1.VolumeAttributesClass{
		ObjectMeta: metav1.ObjectMeta{Name: "gold"}, DriverName: testutil.Driver, Parameters: map[string]string{"iops": "3000"},
	}
	provisioned := []string{"update leases", "create persistentvolumes"}
	tests := []struct {
		name              string
		served, ignored   bool
		modifyVolume      bool
		wantAct           []string
		wantErr, wantSlow bool
		wantMutable       map[string]string
		wantPVClass       string
	}{
		{name: "gate off: class ignored", ignored: true, wantAct: provisioned},
		{name: "gate off, driver with MODIFY_VOLUME: class still ignored", ignored: true, modifyVolume: true, wantAct: provisioned},
		{name: "gate on, API not served: slow failure, no request", modifyVolume: true, wantErr: true, wantSlow: true},
		{
			name: "gate on, API served: parameters passed, class on the PV", served: true, modifyVolume: true,
			wantAct:     append([]string{"get volumeattributesclasses"}, provisioned...),
			wantMutable: gold.Parameters, wantPVClass: "gold",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			claim := testutil.Claim("ns", "a", "uid-a", "fast", "1Gi", func(c *v1.PersistentVolumeClaim) { c.Spec.VolumeAttributesClassName = new("gold") })
			cfg := defaultConfig()
			cfg.AttrClassesServed, cfg.AttrClassesIgnored = tt.served, tt.ignored
			cfg.Capabilities.ModifyVolume = tt.modifyVolume
			h := newHarness(t, cfg, claim, testutil.Class("fast", nil), gold)
			err := h.p.SyncClaim(context.Background(), claim.DeepCopy())
			if (err != nil) != tt.wantErr || IsSlow(err) != tt.wantSlow {
				t.Fatalf("SyncClaim = %v (slow %t), want error %t, slow %t", err, IsSlow(err), tt.wantErr, tt.wantSlow)
			}
			if !equal(h.actions(), tt.wantAct) {
				t.Errorf("actions %q, want %q", h.actions(), tt.wantAct)
			}
			if tt.wantErr {
				if len(h.csi.Creates) != 0 {
					t.Errorf("CreateVolume called %d times", len(h.csi.Creates))
				}
				return
			}
			if len(h.csi.Creates) != 1 {
				t.Fatalf("CreateVolume called %d times, want 1", len(h.csi.Creates))
			}
			if got := h.csi.Creates[0].MutableParameters; !maps.Equal(got, tt.wantMutable) {
				t.Errorf("mutable_parameters %v, want %v", got, tt.wantMutable)
			}
			pv := h.pv(t, h.p.volumeName(claim.UID))
			got := ""
			if pv.Spec.VolumeAttributesClassName != nil {
				got = *pv.Spec.VolumeAttributesClassName
			}
			if got != tt.wantPVClass {
				t.Errorf("PV volumeAttributesClassName %q, want %q", got, tt.wantPVClass)
			}
		})
	}
}
