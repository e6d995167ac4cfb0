// Package attachments finds, for one workload's publish, its MountpointS3PodAttachment and Mountpoint Pod
// in the node plugin's informer caches, waiting a little for the controller. It matches on the controller's
// sharing key less the mount options and the IAM role (see Key), then on the workload's UID, as upstream does.
package attachments

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	corelisters "k8s.io/client-go/listers/core/v1"

	"github.com/stowage-csi/stowage/shared/s3api"
)

// Upstream's waits: the controller creates the attachment and the Pod when the workload is scheduled,
// usually before the kubelet publishes; these cover its lag, not a missing controller.
const (
	DefaultTimeout = 15 * time.Second
	DefaultPoll    = 250 * time.Millisecond
)

// ErrNotFound is wrapped by lookups that ran out of time.
var ErrNotFound = errors.New("not found")

// Key is what the node matches an attachment on: the controller's sharing key without the mount options
// (a PV's may change) and the IAM role.
type Key struct {
	NodeName, PVName, VolumeID, FSGroup, AuthenticationSource string
	// WorkloadNamespace and WorkloadServiceAccount count with pod authentication only.
	WorkloadNamespace, WorkloadServiceAccount string
}

// Store looks attachments and Pods up in informer caches.
type Store struct {
	// List returns the node's attachments (the informer's cache).
	List func() ([]*s3api.MountpointS3PodAttachment, error)
	// Pods lists Mountpoint Pods in their namespace.
	Pods          corelisters.PodNamespaceLister
	Namespace     string
	Timeout, Poll time.Duration
}

func (s *Store) wait(ctx context.Context, cond wait.ConditionWithContextFunc) error {
	timeout, poll := s.Timeout, s.Poll
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	if poll <= 0 {
		poll = DefaultPoll
	}
	return wait.PollUntilContextTimeout(ctx, poll, timeout, true, cond)
}

// Find returns the attachment matching k that lists the workload Pod, and its Mountpoint Pod's name.
func (s *Store) Find(ctx context.Context, k Key, workloadUID string) (*s3api.MountpointS3PodAttachment, string, error) {
	var found *s3api.MountpointS3PodAttachment
	var mpPod string
	var listErr error
	err := s.wait(ctx, func(context.Context) (bool, error) {
		all, err := s.List()
		if err != nil {
			listErr = err
			return false, nil
		}
		for _, a := range all {
			if !k.matches(a) {
				continue
			}
			if name := a.MountpointPodFor(workloadUID); name != "" {
				found, mpPod = a, name
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		if listErr != nil {
			return nil, "", fmt.Errorf("listing MountpointS3PodAttachments: %w", listErr)
		}
		return nil, "", fmt.Errorf("no MountpointS3PodAttachment for node %s, PV %s, volume %s (fsGroup %q, authenticationSource %s) lists workload Pod %s: %w; is the s3-controller running?",
			k.NodeName, k.PVName, k.VolumeID, k.FSGroup, k.AuthenticationSource, workloadUID, ErrNotFound)
	}
	return found, mpPod, nil
}

func (k Key) matches(a *s3api.MountpointS3PodAttachment) bool {
	s := a.Spec
	auth := s.AuthenticationSource
	if auth == "" {
		auth = s3api.AuthenticationSourceDriver
	}
	if s.NodeName != k.NodeName || s.PersistentVolumeName != k.PVName || s.VolumeID != k.VolumeID ||
		s.WorkloadFSGroup != k.FSGroup || auth != k.AuthenticationSource {
		return false
	}
	if auth == s3api.AuthenticationSourcePod {
		return s.WorkloadNamespace == k.WorkloadNamespace && s.WorkloadServiceAccountName == k.WorkloadServiceAccount
	}
	return true
}

// RunningPod waits until the Mountpoint Pod is Running and returns it; the error names the Pod and says
// what it waits for.
func (s *Store) RunningPod(ctx context.Context, name string) (*corev1.Pod, error) {
	var pod *corev1.Pod
	var last error
	err := s.wait(ctx, func(context.Context) (bool, error) {
		p, err := s.Pods.Get(name)
		switch {
		case apierrors.IsNotFound(err):
			last = errors.New("it does not exist (yet)")
			return false, nil
		case err != nil:
			last = err
			return false, nil
		case p.Status.Phase != corev1.PodRunning:
			last = fmt.Errorf("it is %s%s", p.Status.Phase, unschedulable(p))
			return false, nil
		}
		pod = p
		return true, nil
	})
	if err != nil {
		return nil, fmt.Errorf("the Mountpoint Pod %s/%s is not running: %v", s.Namespace, name, last)
	}
	return pod, nil
}

// unschedulable explains the most common reason a Mountpoint Pod stays Pending (awslabs/mountpoint-s3-csi-driver#543).
func unschedulable(p *corev1.Pod) string {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return fmt.Sprintf(" and unschedulable (%s): the node may lack room for it; see https://github.com/awslabs/mountpoint-s3-csi-driver/issues/543", c.Message)
		}
	}
	return ""
}
