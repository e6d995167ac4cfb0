//go:build e2e

package provisioner

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/stowage-csi/stowage/e2e/csimock"
	"github.com/stowage-csi/stowage/e2e/rig"
)

// The claim and driver helpers of the e2e tests.

// waitClaimGone waits until the claim is deleted, finalizers and all.
func waitClaimGone(t *testing.T, kube kubernetes.Interface, pvc *v1.PersistentVolumeClaim, timeout time.Duration) {
	t.Helper()
	rig.Eventually(t, context.Background(), timeout, "claim "+pvc.Name+" gone", func(ctx context.Context) (bool, error) {
		_, err := kube.CoreV1().PersistentVolumeClaims(pvc.Namespace).Get(ctx, pvc.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}

func createClaim(t *testing.T, kube kubernetes.Interface, pvc *v1.PersistentVolumeClaim) *v1.PersistentVolumeClaim {
	t.Helper()
	out, err := kube.CoreV1().PersistentVolumeClaims(pvc.Namespace).Create(context.Background(), pvc, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// waitBound waits until kube-controller-manager bound the claim and returns its PV.
func waitBound(t *testing.T, kube kubernetes.Interface, pvc *v1.PersistentVolumeClaim) *v1.PersistentVolume {
	t.Helper()
	ctx := context.Background()
	var pvName string
	rig.Eventually(t, ctx, 60*time.Second, "claim "+pvc.Name+" bound", func(ctx context.Context) (bool, error) {
		got, err := kube.CoreV1().PersistentVolumeClaims(pvc.Namespace).Get(ctx, pvc.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		pvName = got.Spec.VolumeName
		return got.Status.Phase == v1.ClaimBound, nil
	})
	pv, err := kube.CoreV1().PersistentVolumes().Get(ctx, pvName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.UID != pvc.UID {
		t.Errorf("PV %s claimRef %v, want claim %s", pv.Name, pv.Spec.ClaimRef, pvc.UID)
	}
	return pv
}

func waitNoIntent(t *testing.T, kube kubernetes.Interface, pvc *v1.PersistentVolumeClaim) {
	t.Helper()
	rig.Eventually(t, context.Background(), 30*time.Second, "intent released", func(ctx context.Context) (bool, error) {
		got, err := kube.CoreV1().PersistentVolumeClaims(pvc.Namespace).Get(ctx, pvc.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		_, ann := got.Annotations[intentKey]
		return !slices.Contains(got.Finalizers, intentKey) && !ann, nil
	})
}

func affinityZones(pv *v1.PersistentVolume) []string {
	var out []string
	if pv.Spec.NodeAffinity == nil || pv.Spec.NodeAffinity.Required == nil {
		return nil
	}
	for _, term := range pv.Spec.NodeAffinity.Required.NodeSelectorTerms {
		for _, e := range term.MatchExpressions {
			if e.Key == zoneKey {
				out = append(out, e.Values...)
			}
		}
	}
	return out
}

func driverVolume(t *testing.T, drv *csimock.Driver, name string) csimock.Volume {
	t.Helper()
	for _, v := range drv.Volumes() {
		if v.Name == name {
			return v
		}
	}
	t.Fatalf("driver has no volume %s", name)
	return csimock.Volume{}
}

func countVolumes(drv *csimock.Driver, name string) int {
	n := 0
	for _, v := range drv.Volumes() {
		if v.Name == name {
			n++
		}
	}
	return n
}

// httpGet fetches url and fails t unless the answer is 200 OK.
func httpGet(t *testing.T, url string) string {
	t.Helper()
	code, body := rig.Get(t, context.Background(), url)
	if code != http.StatusOK {
		t.Fatalf("GET %s: %d: %s", url, code, body)
	}
	return body
}

// deleteClaimsWaitPVsGone deletes bound claims, waits until each one's PV is gone (Delete reclaim policy)
// and returns the PVs as they were before.
func deleteClaimsWaitPVsGone(t *testing.T, kube kubernetes.Interface, ns string, names ...string) []*v1.PersistentVolume {
	t.Helper()
	ctx := context.Background()
	var pvs []*v1.PersistentVolume
	for _, name := range names {
		pvc, err := kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		pv, err := kube.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := kube.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		rig.Eventually(t, ctx, 60*time.Second, "PV "+pv.Name+" gone", func(ctx context.Context) (bool, error) {
			_, err := kube.CoreV1().PersistentVolumes().Get(ctx, pv.Name, metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
		pvs = append(pvs, pv)
	}
	return pvs
}

// boundClaims are the names of the bound claims in ns.
func boundClaims(t *testing.T, kube kubernetes.Interface, ns string) []string {
	t.Helper()
	list, err := kube.CoreV1().PersistentVolumeClaims(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, pvc := range list.Items {
		if pvc.Status.Phase == v1.ClaimBound {
			names = append(names, pvc.Name)
		}
	}
	return names
}

// waitEvent waits for an Event of type and reason on the claim whose message contains want, and logs the
// claim's Events.
func waitEvent(t *testing.T, kube kubernetes.Interface, ns, claimName, eventType, reason, want string) {
	t.Helper()
	var seen []string
	rig.Eventually(t, context.Background(), 30*time.Second, eventType+" "+reason+" event on "+claimName+" containing "+want, func(ctx context.Context) (bool, error) {
		evs, err := kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + claimName})
		if err != nil {
			return false, err
		}
		seen = seen[:0]
		for _, e := range evs.Items {
			seen = append(seen, e.Type+" "+e.Reason+": "+e.Message)
			if e.Type == eventType && e.Reason == reason && strings.Contains(e.Message, want) {
				return true, nil
			}
		}
		return false, nil
	})
	t.Logf("events on %s: %q", claimName, seen)
}
