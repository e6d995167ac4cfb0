//go:build e2e

package provisioner

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/stowage-csi/stowage/e2e/rig"
	"github.com/stowage-csi/stowage/e2e/sidecarrig"
)

// The journal of csi-provisioner (provisioner/internal/provision/journal.go): a Lease next to the leader
// election one, whose annotations hold an entry per claim whose volume may exist with no PV recording it.
const (
	journalLease     = "mock-csi-stowage-io-intents"
	journalAnnPrefix = "intent.provisioner.stowage-csi.io/"
)

// recordEntry is the part of an entry the tests read.
type recordEntry struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Volume    string `json:"volume"`
}

// journal returns the journal's entries by claim UID; no Lease means none.
func journal(ctx context.Context, kube kubernetes.Interface) (map[types.UID]recordEntry, error) {
	lease, err := kube.CoordinationV1().Leases(sidecarrig.Namespace).Get(ctx, journalLease, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	out := map[types.UID]recordEntry{}
	for k, v := range lease.Annotations {
		uid, ok := strings.CutPrefix(k, journalAnnPrefix)
		if !ok {
			continue
		}
		var e recordEntry
		if err := json.Unmarshal([]byte(v), &e); err != nil {
			return nil, err
		}
		out[types.UID(uid)] = e
	}
	return out, nil
}

// recordHas reports whether the record holds an entry for the claim with uid, for volume volName.
func recordHas(t *testing.T, kube kubernetes.Interface, uid types.UID, volName string) bool {
	t.Helper()
	got, err := journal(context.Background(), kube)
	if err != nil {
		t.Fatal(err)
	}
	e, ok := got[uid]
	return ok && e.Volume == volName
}

// waitRecordCleared waits until the record has no entry for the claim with uid (cleared entries are written
// with the next record write, or alone after 10 s).
func waitRecordCleared(t *testing.T, kube kubernetes.Interface, uid types.UID) {
	t.Helper()
	rig.Eventually(t, context.Background(), 60*time.Second, "entry of claim "+string(uid)+" cleared from the journal", func(ctx context.Context) (bool, error) {
		got, err := journal(ctx, kube)
		_, ok := got[uid]
		return err == nil && !ok, err
	})
}

// countRecordWrites counts the writes of csi-provisioner to its journal Lease in writes.
func countRecordWrites(writes []rig.AuditWrite) int {
	n := 0
	for _, w := range writes {
		if strings.HasPrefix(w.Resource, "leases") && w.Name == journalLease {
			n++
		}
	}
	return n
}
