package s3install

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stowage-csi/stowage/e2e/rig"
)

// podSelector selects the install's Pods: the chart labels them by app only, as upstream's does.
const podSelector = "app in (s3-csi-controller,s3-csi-node)"

// Uninstall runs helm uninstall as a user would and waits for the install's Pods to go. Stop does not
// uninstall again.
func (s *Stack) Uninstall(ctx context.Context) error {
	s.uninstalled = true
	if _, err := s.helm.Uninstall(ctx, Release, Namespace); err != nil {
		// A helm install that failed before it recorded the release leaves nothing to uninstall.
		if strings.Contains(err.Error(), "release: not found") {
			return nil
		}
		return fmt.Errorf("helm uninstall %s: %w", Release, err)
	}
	// Before the nodes stop: a container still exiting would be in a cgroup the node's teardown removes.
	err := rig.WaitFor(ctx, s.opts.InstallTimeout, "the install's Pods to go", func(ctx context.Context) (bool, error) {
		pods, err := s.Client.CoreV1().Pods(Namespace).List(ctx, metav1.ListOptions{LabelSelector: podSelector})
		if err != nil {
			return false, err
		}
		return len(pods.Items) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("after helm uninstall %s: %w\n%s", Release, err, s.diagnosis(ctx))
	}
	return nil
}

// Stop uninstalls the chart (unless Uninstall did), stops versitygw and the cluster, and removes the
// install's directory if Start made it. It goes on past errors, returning them all; a second call returns nil.
func (s *Stack) Stop(ctx context.Context) error {
	if s.stopped {
		return nil
	}
	s.stopped = true
	var errs []error
	if s.installed && !s.uninstalled {
		errs = append(errs, s.Uninstall(ctx))
	}
	if s.S3 != nil {
		s.S3.Stop()
	}
	if s.Cluster != nil {
		errs = append(errs, s.Cluster.Stop(ctx))
	}
	if s.ownDir {
		if err := os.RemoveAll(s.dir); err != nil {
			errs = append(errs, fmt.Errorf("remove the install's directory: %w", err))
		}
	}
	return errors.Join(errs...)
}
