//go:build e2e

package s3controller

import (
	"context"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	e2erig "github.com/stowage-csi/stowage/e2e/rig"
	"github.com/stowage-csi/stowage/shared/s3api"
)

// TestE2ES3Controller runs s3-controller under upstream's RBAC and configuration and walks workloads through
// sharing, Stowage's read-only/read-write split, a deleted Mountpoint Pod, a kill -9 in the middle of a burst,
// and teardown down to no Mountpoint Pod and no attachment.
func TestE2ES3Controller(t *testing.T) {
	r := startRig(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	r.volume(t, ctx, "bucket-a", "allow-delete", "region us-east-1")
	top := t // controllers started in a subtest must outlive it: their cleanup kills them
	ctl := r.startController(top, "s3-controller")
	first := ctl
	var all []string // the UIDs of the workloads that should be attached

	t.Run("sharing, read-only split, fsGroup", func(t *testing.T) {
		rw1 := r.workload(t, ctx, "rw-1", "bucket-a")
		rw2 := r.workload(t, ctx, "rw-2", "bucket-a")
		ro := r.workload(t, ctx, "ro-1", "bucket-a", readOnly)
		fs := r.workload(t, ctx, "fs-1", "bucket-a", fsGroup(2000))
		all = append(all, rw1, rw2, ro, fs)
		var s *state
		e2erig.Eventually(t, ctx, waitTimeout, "four workloads attached", func(ctx context.Context) (bool, error) {
			var err error
			if s, err = r.state(ctx); err != nil {
				return false, err
			}
			return s.converged(all)
		})
		if s.mpOf[rw1] != s.mpOf[rw2] || s.s3paOf[rw1] != s.s3paOf[rw2] {
			t.Errorf("rw-1 and rw-2 do not share: %v %v", s.mpOf, s.s3paOf)
		}
		if s.mpOf[ro] == s.mpOf[rw1] || s.s3paOf[ro] != s.s3paOf[rw1] {
			t.Errorf("read-only workload: Mountpoint Pod %s (rw %s), attachment %s (rw %s); want its own Pod in the same attachment",
				s.mpOf[ro], s.mpOf[rw1], s.s3paOf[ro], s.s3paOf[rw1])
		}
		if s.mpOf[fs] == s.mpOf[rw1] || s.s3paOf[fs] == s.s3paOf[rw1] {
			t.Errorf("fsGroup 2000 shares with fsGroup unset: %v %v", s.mpOf, s.s3paOf)
		}
		if len(s.attachments) != 2 || len(s.mpPods) != 3 {
			t.Errorf("%d attachments, %d Mountpoint Pods; want 2, 3", len(s.attachments), len(s.mpPods))
		}
		checkMountpointPod(t, s.mpPods[s.mpOf[ro]], "read-only")
		checkMountpointPod(t, s.mpPods[s.mpOf[rw1]], "read-write")
		for _, a := range s.attachments {
			if a.Spec.MountOptions != "allow-delete,region us-east-1" || a.Spec.NodeName != nodeName ||
				a.Spec.VolumeID != "bucket-a-bucket" || a.Spec.AuthenticationSource != "driver" ||
				a.Labels[s3api.LabelCreatedByVersion] != "e2e" || !strings.HasPrefix(a.Name, "s3pa-") {
				t.Errorf("attachment %s: %+v labels %v", a.Name, a.Spec, a.Labels)
			}
		}
	})

	t.Run("a deleted Mountpoint Pod of active workloads is created again", func(t *testing.T) {
		s, err := r.state(ctx)
		if err != nil {
			t.Fatal(err)
		}
		mp := s.mpOf[all[0]]
		old := s.mpPods[mp].UID
		r.deletePod(t, ctx, mpNamespace, mp)
		e2erig.Eventually(t, ctx, waitTimeout, "Mountpoint Pod "+mp+" back", func(ctx context.Context) (bool, error) {
			p, err := r.mpPod(ctx, mp)
			return err == nil && p.UID != old, err
		})
	})

	t.Run("kill -9 in the middle of a burst, restart converges without duplicates", func(t *testing.T) {
		for i := range 8 {
			all = append(all, r.workload(t, ctx, fmt.Sprintf("burst-%d", i), "bucket-a"))
		}
		ctl.Signal(syscall.SIGKILL)
		<-ctl.Done()
		// While it is down: a workload goes (only the stale cleaner can notice) and more arrive.
		r.deletePod(t, ctx, "default", "rw-2")
		all = remove(all, 1)
		for i := range 3 {
			all = append(all, r.workload(t, ctx, fmt.Sprintf("late-%d", i), "bucket-a", fsGroup(3000)))
		}
		ctl = r.startController(top, "s3-controller-restarted")
		e2erig.Eventually(t, ctx, waitTimeout, "all workloads attached once after the restart", func(ctx context.Context) (bool, error) {
			s, err := r.state(ctx)
			if err != nil {
				return false, err
			}
			return s.converged(all)
		})
		s, _ := r.state(ctx)
		// fsGroup unset, fsGroup 2000, fsGroup 3000: one attachment each (read-only is a Pod, not a key).
		if len(s.attachments) != 3 {
			t.Errorf("%d attachments after the restart, want 3", len(s.attachments))
		}
		for _, path := range []string{"/healthz", "/healthz/leader-election", "/readyz"} {
			if code, body := e2erig.Get(t, ctx, "http://"+r.health+path); code != 200 {
				t.Errorf("%s %d: %s", path, code, body)
			}
		}
		_, metrics := e2erig.Get(t, ctx, "http://"+r.metrics+"/metrics")
		if !strings.Contains(metrics, "s3_controller_mountpoint_pods_created_total") || !strings.Contains(metrics, "controller_runtime_reconcile_total") {
			t.Errorf("metrics lack the controller's series:\n%.2000s", metrics)
		}
	})

	t.Run("teardown: needs-unmount, Succeeded Mountpoint Pods and empty attachments deleted", func(t *testing.T) {
		pods, err := r.client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// Half finish (kubelet reports Succeeded), half are deleted.
		for i, p := range pods.Items {
			if i%2 == 0 {
				r.setPhase(t, ctx, "default", p.Name, corev1.PodSucceeded)
			} else {
				r.deletePod(t, ctx, "default", p.Name)
			}
		}
		e2erig.Eventually(t, ctx, waitTimeout, "every Mountpoint Pod asked to unmount and no attachment left", func(ctx context.Context) (bool, error) {
			s, err := r.state(ctx)
			if err != nil {
				return false, err
			}
			if len(s.attachments) > 0 {
				return false, fmt.Errorf("%d attachments left", len(s.attachments))
			}
			for name, p := range s.mpPods {
				if p.Annotations[s3api.AnnotationNeedsUnmount] != "true" {
					return false, fmt.Errorf("%s not asked to unmount", name)
				}
			}
			return true, nil
		})
		s, err := r.state(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for name := range s.mpPods { // the node unmounted, Mountpoint exited 0
			r.setPhase(t, ctx, mpNamespace, name, corev1.PodSucceeded)
		}
		e2erig.Eventually(t, ctx, waitTimeout, "succeeded Mountpoint Pods deleted", func(ctx context.Context) (bool, error) {
			s, err := r.state(ctx)
			if err != nil {
				return false, err
			}
			return len(s.mpPods) == 0, fmt.Errorf("%d Mountpoint Pods left", len(s.mpPods))
		})
	})

	// Upstream's RBAC was enough: the API server refused the controllers nothing.
	for _, p := range []*e2erig.Process{first, ctl} {
		log, err := os.ReadFile(p.LogPath)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(log), "forbidden") {
			t.Errorf("%s was refused something under deploy/rbac/s3-controller.yaml:\n%s", p.Name, log)
		}
	}
}

// checkMountpointPod checks the generated Pod's upstream fields as the API server stored them (it passed the
// restricted Pod Security Standard of the mount-s3 namespace to get there).
func checkMountpointPod(t *testing.T, p *corev1.Pod, access string) {
	t.Helper()
	if p == nil {
		t.Fatal("no Mountpoint Pod")
	}
	c := p.Spec.Containers[0]
	ok := strings.HasPrefix(p.Name, "mp-") && p.GenerateName == "mp-" &&
		p.Labels[s3api.LabelMountedByVersion] == "e2e" && p.Labels[s3api.LabelMountpointVersion] == "1.23.0" &&
		p.Annotations[s3api.AnnotationVolumeName] == "bucket-a" && p.Annotations[s3api.AnnotationVolumeID] == "bucket-a-bucket" &&
		p.Annotations[s3api.AnnotationDaemonSetPod] == "true" && p.Annotations["s3.stowage-csi.io/workload-access"] == access &&
		p.Spec.PriorityClassName == "mount-s3-critical" && p.Spec.Priority != nil && *p.Spec.Priority == 1000000000 &&
		p.Spec.RestartPolicy == corev1.RestartPolicyOnFailure && *p.Spec.TerminationGracePeriodSeconds == 600 &&
		c.Name == "mountpoint" && c.Image == image && c.Command[0] == "/bin/aws-s3-csi-mounter" &&
		p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchFields[0].Values[0] == nodeName
	if !ok {
		t.Errorf("Mountpoint Pod %s: labels %v annotations %v spec %+v", p.Name, p.Labels, p.Annotations, p.Spec)
	}
}

func remove(s []string, i int) []string { return append(s[:i:i], s[i+1:]...) }
