package testutil

import (
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Driver is the driver name the builders use.
const Driver = "test.csi.example.com"

// Claim builds a PVC annotated for Driver in class, requesting size.
func Claim(ns, name, uid, class, size string, opts ...func(*v1.PersistentVolumeClaim)) *v1.PersistentVolumeClaim {
	c := &v1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: name, UID: types.UID(uid), ResourceVersion: "1",
			Annotations: map[string]string{"volume.kubernetes.io/storage-provisioner": Driver},
			Finalizers:  []string{"kubernetes.io/pvc-protection"},
		},
		Spec: v1.PersistentVolumeClaimSpec{
			StorageClassName: &class,
			AccessModes:      []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
			Resources: v1.VolumeResourceRequirements{Requests: v1.ResourceList{
				v1.ResourceStorage: resource.MustParse(size),
			}},
		},
		Status: v1.PersistentVolumeClaimStatus{Phase: v1.ClaimPending},
	}
	for _, o := range opts {
		o(c)
	}
	return c
}

// Class builds a StorageClass of Driver.
func Class(name string, params map[string]string, opts ...func(*storagev1.StorageClass)) *storagev1.StorageClass {
	c := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Provisioner: Driver, Parameters: params}
	for _, o := range opts {
		o(c)
	}
	return c
}

// WaitForFirstConsumer sets a class's binding mode.
func WaitForFirstConsumer(c *storagev1.StorageClass) {
	m := storagev1.VolumeBindingWaitForFirstConsumer
	c.VolumeBindingMode = &m
}

// Node builds a Node with labels and its CSINode registering Driver with keys.
func Node(name string, labels map[string]string, keys ...string) (*v1.Node, *storagev1.CSINode) {
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	cn := &storagev1.CSINode{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{{
			Name: Driver, NodeID: name, TopologyKeys: keys,
		}}},
	}
	return n, cn
}
