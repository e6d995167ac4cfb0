// Package inuse tells which claims running Pods use, for --handle-volume-inuse-error: a driver that can only
// expand offline answers FailedPrecondition while a Pod uses the volume, and the resizer waits for the Pod to
// end instead of retrying.
//
// Upstream caches every Pod of the cluster in full for this (its top complaint: the resizer OOMs on big
// clusters, kubernetes-csi/external-resizer#211). Here the informer starts only with the flag, and it keeps of
// each Pod only its name, namespace, phase and the claim names of its volumes: a metadata-only informer would be
// smaller still, but a Pod's metadata does not say which claims it mounts.
package inuse

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

const claimIndex = "claim"

// Pods answers from the Pod informer's cache. Safe for concurrent use.
type Pods struct {
	indexer cache.Indexer
}

// New sets the trimming transform and the claim index on informer, which must not have started, and calls
// released(namespace, claim) for each claim of a Pod that ended or was deleted, so the claim's expansion is
// retried at once.
func New(informer cache.SharedIndexInformer, released func(namespace, claim string)) (*Pods, error) {
	if err := informer.SetTransform(Trim); err != nil {
		return nil, fmt.Errorf("setting the Pod transform: %w", err)
	}
	if err := informer.AddIndexers(cache.Indexers{claimIndex: indexClaims}); err != nil {
		return nil, fmt.Errorf("adding the Pod claim index: %w", err)
	}
	release := func(obj any) {
		if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		if pod, ok := obj.(*v1.Pod); ok {
			for _, c := range Claims(pod) {
				released(pod.Namespace, c)
			}
		}
	}
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, obj any) {
			if pod, ok := obj.(*v1.Pod); ok && terminated(pod) {
				release(pod)
			}
		},
		DeleteFunc: release,
	}); err != nil {
		return nil, fmt.Errorf("adding the Pod event handler: %w", err)
	}
	return &Pods{indexer: informer.GetIndexer()}, nil
}

// Used reports whether a Pod that has not ended uses the claim.
func (p *Pods) Used(namespace, claim string) bool {
	pods, err := p.indexer.ByIndex(claimIndex, namespace+"/"+claim)
	return err == nil && len(pods) > 0
}

// Trim keeps of a Pod what Used needs.
func Trim(obj any) (any, error) {
	pod, ok := obj.(*v1.Pod)
	if !ok {
		return obj, nil
	}
	out := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID, ResourceVersion: pod.ResourceVersion},
		Status:     v1.PodStatus{Phase: pod.Status.Phase},
	}
	for _, c := range Claims(pod) {
		out.Spec.Volumes = append(out.Spec.Volumes, v1.Volume{VolumeSource: v1.VolumeSource{
			PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: c},
		}})
	}
	return out, nil
}

// Claims are the names of the claims pod mounts, generic ephemeral volumes' included ("<pod>-<volume>").
func Claims(pod *v1.Pod) []string {
	var out []string
	for _, vol := range pod.Spec.Volumes {
		switch {
		case vol.PersistentVolumeClaim != nil:
			out = append(out, vol.PersistentVolumeClaim.ClaimName)
		case vol.Ephemeral != nil:
			out = append(out, pod.Name+"-"+vol.Name)
		}
	}
	return out
}

func indexClaims(obj any) ([]string, error) {
	pod, ok := obj.(*v1.Pod)
	if !ok || terminated(pod) {
		return nil, nil
	}
	var keys []string
	for _, c := range Claims(pod) {
		keys = append(keys, pod.Namespace+"/"+c)
	}
	return keys, nil
}

func terminated(pod *v1.Pod) bool {
	return pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed
}
