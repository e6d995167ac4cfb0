//go:build e2e

package cluster_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/stowage-csi/stowage/e2e/cluster"
	"github.com/stowage-csi/stowage/e2e/cluster/clustertest"
	"github.com/stowage-csi/stowage/e2e/rig"
	"github.com/stowage-csi/stowage/e2e/tools"
)

// waitTimeout bounds every wait for a controller; controllers act in seconds, the margin is for a
// machine busy compiling.
const waitTimeout = 2 * time.Minute

func TestE2EControlPlane(t *testing.T) {
	c := clustertest.Start(t)
	t.Run("the API server reports the pinned release", func(t *testing.T) {
		testServerVersion(t, c.Client())
	})
	t.Run("attach-detach controller creates the VolumeAttachment", func(t *testing.T) {
		testAttachDetach(t, c.Client())
	})
	t.Run("service account kubeconfig is bound by RBAC applied from YAML", func(t *testing.T) {
		testServiceAccountRBAC(t, c)
	})
	t.Run("apply waits for a kind its own file defines", func(t *testing.T) {
		testApplyCRDAndResource(t, c)
	})
}

// testServerVersion checks kube-apiserver reports the k8s.io/kubernetes release e2e/tools/kube pins (a
// build without the version stamp reports v0.0.0-master, which Helm charts' kubeVersion constraints refuse).
func testServerVersion(t *testing.T, client kubernetes.Interface) {
	root, err := rig.RepoRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	want, err := tools.Version(root, tools.Kube())
	if err != nil {
		t.Fatal(err)
	}
	v, err := client.Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	if v.GitVersion != want {
		t.Errorf("kube-apiserver reports %s (major %q, minor %q), want %s", v.GitVersion, v.Major, v.Minor, want)
	}
}

// The objects of testAttachDetach.
const (
	smokeDriver = "smoke.csi.stowage.io"
	smokeNode   = "smoke-node"
	smokePV     = "smoke-pv"
	smokeClaim  = "smoke-claim"
)

// testAttachDetach walks the path the CSI attacher sidecar depends on: PV binder binds a pre-bound claim,
// and the attach-detach controller turns a scheduled Pod using it into a VolumeAttachment.
func testAttachDetach(t *testing.T, client kubernetes.Interface) {
	ctx := context.Background()
	createAttachableVolume(t, ctx, client)
	// The attach-detach controller only attaches volumes of Bound claims.
	rig.Eventually(t, ctx, waitTimeout, "PVC bound by the PV binder", func(ctx context.Context) (bool, error) {
		pvc, err := client.CoreV1().PersistentVolumeClaims(metav1.NamespaceDefault).Get(ctx, smokeClaim, metav1.GetOptions{})
		return err == nil && pvc.Status.Phase == corev1.ClaimBound, err
	})

	// A Pod bound to the node (no scheduler or kubelet needed): it is what puts the volume into the
	// controller's desired state of the world for that node.
	_, err := client.CoreV1().Pods(metav1.NamespaceDefault).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "smoke-pod"},
		Spec: corev1.PodSpec{
			NodeName:   smokeNode,
			Containers: []corev1.Container{{Name: "app", Image: "registry.invalid/app:never-pulled"}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: smokeClaim},
			}}},
		},
	}, metav1.CreateOptions{})
	must(t, err)

	var va storagev1.VolumeAttachment
	rig.Eventually(t, ctx, waitTimeout, "VolumeAttachment created by the attach-detach controller", func(ctx context.Context) (bool, error) {
		list, err := client.StorageV1().VolumeAttachments().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, v := range list.Items {
			if v.Spec.Source.PersistentVolumeName != nil && *v.Spec.Source.PersistentVolumeName == smokePV {
				va = v
				return true, nil
			}
		}
		return false, nil
	})
	if va.Spec.Attacher != smokeDriver || va.Spec.NodeName != smokeNode {
		t.Errorf("VolumeAttachment %s: attacher %q node %q, want %q %q", va.Name, va.Spec.Attacher, va.Spec.NodeName, smokeDriver, smokeNode)
	}
	if va.Status.Attached {
		t.Errorf("VolumeAttachment %s is attached with no CSI attacher running", va.Name)
	}
}

// createAttachableVolume creates the node, the CSIDriver, a PersistentVolume of it and a claim the PV is
// pre-bound to.
func createAttachableVolume(t *testing.T, ctx context.Context, client kubernetes.Interface) {
	t.Helper()
	// The attach-detach controller manages only nodes whose kubelet handed attach/detach to it, which
	// the kubelet says with this annotation; on other nodes it leaves attaching to the kubelet.
	_, err := client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{
		Name:        smokeNode,
		Annotations: map[string]string{"volumes.kubernetes.io/controller-managed-attach-detach": "true"},
	}}, metav1.CreateOptions{})
	must(t, err)

	// attachRequired makes the CSI plugin in kube-controller-manager treat the volume as attachable.
	attach := true
	_, err = client.StorageV1().CSIDrivers().Create(ctx, &storagev1.CSIDriver{
		ObjectMeta: metav1.ObjectMeta{Name: smokeDriver},
		Spec:       storagev1.CSIDriverSpec{AttachRequired: &attach},
	}, metav1.CreateOptions{})
	must(t, err)

	size := resource.MustParse("1Gi")
	noClass := ""
	_, err = client.CoreV1().PersistentVolumes().Create(ctx, &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: smokePV},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: size},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			StorageClassName:              noClass,
			// Pre-bound to the claim by name; the binder fills in its UID, which the attach-detach
			// controller checks before it trusts the binding.
			ClaimRef: &corev1.ObjectReference{Namespace: metav1.NamespaceDefault, Name: smokeClaim},
			PersistentVolumeSource: corev1.PersistentVolumeSource{
				CSI: &corev1.CSIPersistentVolumeSource{Driver: smokeDriver, VolumeHandle: "smoke-volume-1"},
			},
		},
	}, metav1.CreateOptions{})
	must(t, err)
	_, err = client.CoreV1().PersistentVolumeClaims(metav1.NamespaceDefault).Create(ctx, &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: smokeClaim},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: &noClass,
			VolumeName:       smokePV,
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: size}},
		},
	}, metav1.CreateOptions{})
	must(t, err)
}

// testServiceAccountRBAC shows a ServiceAccount kubeconfig authenticates as that account and gets
// exactly what RBAC grants it.
func testServiceAccountRBAC(t *testing.T, c *cluster.Cluster) {
	ctx := context.Background()
	const ns, sa = "rbac-smoke", "reader"
	path, err := c.ServiceAccountKubeconfig(ctx, ns, sa)
	must(t, err)
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	must(t, err)
	client, err := kubernetes.NewForConfig(cfg)
	must(t, err)

	review, err := client.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	must(t, err)
	if want := "system:serviceaccount:" + ns + ":" + sa; review.Status.UserInfo.Username != want {
		t.Errorf("authenticated as %q, want %q", review.Status.UserInfo.Username, want)
	}

	if _, err := client.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("list configmaps before RBAC: err = %v, want Forbidden", err)
	}

	manifest := filepath.Join(t.TempDir(), "rbac.yaml")
	must(t, os.WriteFile(manifest, []byte(`apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: configmap-reader
  namespace: rbac-smoke
rules:
- apiGroups: [""]
  resources: ["configmaps"]
  verbs: ["get", "list"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: configmap-reader
  namespace: rbac-smoke
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: configmap-reader
subjects:
- kind: ServiceAccount
  name: reader
  namespace: rbac-smoke
`), 0o644))
	must(t, c.Apply(ctx, manifest))

	// The authorizer learns of new bindings through its informer, a moment after the write.
	rig.Eventually(t, ctx, waitTimeout, "configmaps listable after the RoleBinding", func(ctx context.Context) (bool, error) {
		_, err := client.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
		if apierrors.IsForbidden(err) {
			return false, nil
		}
		return err == nil, err
	})
	if _, err := client.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("list secrets (not granted): err = %v, want Forbidden", err)
	}
	if _, err := client.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("list configmaps in another namespace: err = %v, want Forbidden", err)
	}
}

// testApplyCRDAndResource applies a CustomResourceDefinition and a resource of its kind from one file,
// as deploy/ manifests do.
func testApplyCRDAndResource(t *testing.T, c *cluster.Cluster) {
	ctx := context.Background()
	manifest := filepath.Join(t.TempDir(), "crd.yaml")
	must(t, os.WriteFile(manifest, []byte(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.smoke.stowage.io
spec:
  group: smoke.stowage.io
  scope: Cluster
  names: {plural: widgets, singular: widget, kind: Widget}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer}
---
apiVersion: smoke.stowage.io/v1
kind: Widget
metadata:
  name: first
spec:
  size: 3
`), 0o644))
	must(t, c.Apply(ctx, manifest))

	dyn, err := dynamic.NewForConfig(c.RESTConfig())
	must(t, err)
	w, err := dyn.Resource(schema.GroupVersionResource{Group: "smoke.stowage.io", Version: "v1", Resource: "widgets"}).
		Get(ctx, "first", metav1.GetOptions{})
	must(t, err)
	if size, found, err := unstructured.NestedInt64(w.Object, "spec", "size"); err != nil || !found || size != 3 {
		t.Errorf("widget spec.size = %d (found %v, %v), want 3", size, found, err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
