//go:build bench

package statefulsetstorm_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/stowage-csi/stowage/e2e/ebsinstall"
	"github.com/stowage-csi/stowage/e2e/images"
	"github.com/stowage-csi/stowage/e2e/rig"
)

const (
	namespace    = "default"
	setName      = "storm"
	claimName    = "data" // the claim template's name: claims are data-storm-<i>
	storageClass = "storm-gp3"
	appLabel     = "app"
	// stormTimeout bounds each half of a storm (to every Pod Running, to no volume) on 2 loaded cores.
	stormTimeout = 30 * time.Minute
)

// result is one column's storm.
type result struct {
	column string
	// perPod is each Pod's time from the StatefulSet's create to its first Running, sorted.
	perPod []time.Duration
	// running is the time to the last Pod's Running; deleted the time from scale to 0 and the claims' delete
	// to ec2sim holding no volume.
	running, deleted time.Duration
	podsPerNode      map[string]int
	ec2Calls         map[string]int // EC2 calls by action, from the StatefulSet's create to the last volume gone
	writes           map[string]int // API writes by component, over the same span
	// slowest is the last Pod to run, and sched the scheduler's part in its start (see schedulerTime).
	slowest string
	sched   time.Duration
}

// runStorm creates a StatefulSet of n replicas, each with a gp3 claim, waits for every Pod to run, then scales
// it to 0 and deletes the claims at once, as a user tearing it down would, and waits until EC2 holds no
// volume, no PersistentVolume and no VolumeAttachment is left.
func runStorm(t *testing.T, ctx context.Context, s *ebsinstall.Stack, audit *rig.AuditLog, column string, n int) result {
	t.Helper()
	client := s.Cluster.Client()
	r := result{column: column, podsPerNode: map[string]int{}}
	waitLeaders(t, ctx, client)
	ec2Before, err := ec2Calls(ctx, s.EC2.URL())
	if err != nil {
		t.Fatal(err)
	}
	pods, err := client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: appLabel + "=" + setName})
	if err != nil {
		t.Fatal(err)
	}
	w, err := watchtools.NewRetryWatcherWithContext(ctx, pods.ResourceVersion, &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = appLabel + "=" + setName
			return client.CoreV1().Pods(namespace).Watch(ctx, o)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	start := time.Now()
	if _, err := client.AppsV1().StatefulSets(namespace).Create(ctx, statefulSet(n), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	runningAt, nodeOf := waitRunning(t, ctx, w, start, n)
	for name, d := range runningAt {
		r.perPod = append(r.perPod, d)
		r.podsPerNode[nodeOf[name]]++
		if d > r.running {
			r.running, r.slowest = d, name
		}
	}
	slices.Sort(r.perPod)
	checkPodsHealthy(t, ctx, client, n)

	stop := time.Now()
	scale0 := []byte(`{"spec":{"replicas":0}}`)
	if _, err := client.AppsV1().StatefulSets(namespace).Patch(ctx, setName, types.MergePatchType, scale0, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		name := fmt.Sprintf("%s-%s-%d", claimName, setName, i)
		if err := client.CoreV1().PersistentVolumeClaims(namespace).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatalf("delete claim %s: %v", name, err)
		}
	}
	rig.Eventually(t, ctx, stormTimeout, "ec2sim to hold no volume", func(context.Context) (bool, error) {
		if len(s.EC2.State().Volumes) > 0 {
			return false, nil
		}
		r.deleted = time.Since(stop)
		return true, nil
	})
	end := time.Now()
	if err := client.AppsV1().StatefulSets(namespace).Delete(ctx, setName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitNothingLeft(t, ctx, client)

	ec2After, err := ec2Calls(ctx, s.EC2.URL())
	if err != nil {
		t.Fatal(err)
	}
	r.ec2Calls = diffCalls(ec2After, ec2Before)
	writes := rig.Filter(audit.MustWrites(t), func(w rig.AuditWrite) bool { return !w.Time.Before(start) && !w.Time.After(end) })
	r.writes = writesByComponent(writes)
	r.sched = schedulerTime(writes, r.slowest)
	// Each column as it ends too, so a run that fails later still shows what it measured.
	t.Logf("%s: all Running %s (p50 %s, p99 %s), no volume %s, EC2 calls %v, API writes %v", column, secs(r.running),
		secs(quantile(r.perPod, 0.5)), secs(quantile(r.perPod, 0.99)), secs(r.deleted), r.ec2Calls, r.writes)
	return r
}

// waitRunning reads the Pods' watch until n Pods have been Running, and returns when each first was (since
// start) and its node. A Pod that fails ends the test: the storm measures Pods that run.
func waitRunning(t *testing.T, ctx context.Context, w watch.Interface, start time.Time, n int) (map[string]time.Duration, map[string]string) {
	t.Helper()
	runningAt, nodeOf := map[string]time.Duration{}, map[string]string{}
	timeout := time.After(stormTimeout)
	for len(runningAt) < n {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatalf("the Pods' watch ended with %d of %d Pods Running", len(runningAt), n)
			}
			if ev.Type == watch.Error {
				t.Fatalf("the Pods' watch: %v", ev.Object)
			}
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			switch p.Status.Phase {
			case corev1.PodRunning:
				if _, seen := runningAt[p.Name]; !seen {
					runningAt[p.Name], nodeOf[p.Name] = time.Since(start), p.Spec.NodeName
				}
			case corev1.PodFailed:
				t.Fatalf("Pod %s failed: %s %s", p.Name, p.Status.Reason, p.Status.Message)
			}
		case <-timeout:
			t.Fatalf("%d of %d Pods Running after %s", len(runningAt), n, stormTimeout)
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		}
	}
	return runningAt, nodeOf
}

// checkPodsHealthy checks that every Pod still runs its one container without a restart: the container wrote
// to its volume before it sleeps, and exits (so restarts) if it could not.
func checkPodsHealthy(t *testing.T, ctx context.Context, client kubernetes.Interface, n int) {
	t.Helper()
	pods, err := client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: appLabel + "=" + setName})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != n {
		t.Fatalf("%d Pods, want %d", len(pods.Items), n)
	}
	for _, p := range pods.Items {
		if p.Status.Phase != corev1.PodRunning || len(p.Status.ContainerStatuses) != 1 ||
			p.Status.ContainerStatuses[0].RestartCount != 0 || p.Status.ContainerStatuses[0].State.Running == nil {
			t.Errorf("Pod %s: phase %s, containers %+v; want Running without a restart", p.Name, p.Status.Phase, p.Status.ContainerStatuses)
		}
	}
}

// leaderLeases is how many Leases the chart's controller Pod holds: one per sidecar (provisioner, attacher,
// resizer, snapshotter).
const leaderLeases = 4

// waitLeaders waits until the controller Pods that run now hold a Lease per sidecar: after a reinstall, the
// old Pods' Leases stay held until they expire, and a storm started then would count that wait. Leases the
// old Pods left under names the new binaries do not use stay held by them, and are not counted.
func waitLeaders(t *testing.T, ctx context.Context, client kubernetes.Interface) {
	t.Helper()
	// The last poll's error may be the deadline's own, so the Leases as last read are logged beside it.
	var last string
	t.Cleanup(func() {
		if t.Failed() && last != "" {
			t.Logf("the driver's Leases as last read: %s", last)
		}
	})
	rig.Eventually(t, ctx, 3*time.Minute, "the driver's Leases held by its running controller Pods", func(ctx context.Context) (bool, error) {
		pods, err := client.CoreV1().Pods(ebsinstall.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app=ebs-csi-controller"})
		if err != nil {
			return false, err
		}
		leases, err := client.CoordinationV1().Leases(ebsinstall.Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		var held, others []string
		for _, l := range leases.Items {
			holder := ""
			if l.Spec.HolderIdentity != nil {
				holder = *l.Spec.HolderIdentity
			}
			if slices.ContainsFunc(pods.Items, func(p corev1.Pod) bool {
				return p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil && strings.Contains(holder, p.Name)
			}) {
				held = append(held, l.Name)
			} else {
				others = append(others, l.Name+"="+holder)
			}
		}
		last = fmt.Sprintf("running controller Pods hold %q; the others: %q", held, others)
		if len(held) < leaderLeases {
			return false, errors.New(last)
		}
		return true, nil
	})
}

// waitNothingLeft waits for the Pods, the claims' PersistentVolumes and the VolumeAttachments to be gone.
func waitNothingLeft(t *testing.T, ctx context.Context, client kubernetes.Interface) {
	t.Helper()
	rig.Eventually(t, ctx, stormTimeout, "no storm Pod, PersistentVolume or VolumeAttachment", func(ctx context.Context) (bool, error) {
		pods, err := client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: appLabel + "=" + setName})
		if err != nil {
			return false, err
		}
		pvs, err := client.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		vas, err := client.StorageV1().VolumeAttachments().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		_, err = client.AppsV1().StatefulSets(namespace).Get(ctx, setName, metav1.GetOptions{})
		return len(pods.Items) == 0 && len(pvs.Items) == 0 && len(vas.Items) == 0 && apierrors.IsNotFound(err), nil
	})
}

func createStorageClass(ctx context.Context, client kubernetes.Interface) error {
	wffc, del := storagev1.VolumeBindingWaitForFirstConsumer, corev1.PersistentVolumeReclaimDelete
	sc := &storagev1.StorageClass{
		ObjectMeta:  metav1.ObjectMeta{Name: storageClass},
		Provisioner: ebsinstall.Driver, Parameters: map[string]string{"type": "gp3"},
		VolumeBindingMode: &wffc, ReclaimPolicy: &del,
	}
	_, err := client.StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{})
	return err
}

// statefulSet is n replicas started in parallel, spread over the nodes, each writing to its own 1 GiB gp3
// volume and then sleeping until told to stop (a shell as PID 1 would ignore SIGTERM without the trap, and
// every Pod would take its whole grace period to go).
func statefulSet(n int) *appsv1.StatefulSet {
	replicas := int32(n)
	labels := map[string]string{appLabel: setName}
	script := `echo "$HOSTNAME" > /data/written || exit 1; trap 'exit 0' TERM; while :; do sleep 3600 & wait $!; done`
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: setName, Namespace: namespace},
		Spec: appsv1.StatefulSetSpec{
			Replicas: &replicas, PodManagementPolicy: appsv1.ParallelPodManagement,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{
						MaxSkew: 1, TopologyKey: corev1.LabelHostname, WhenUnsatisfiable: corev1.ScheduleAnyway,
						LabelSelector: &metav1.LabelSelector{MatchLabels: labels},
					}},
					Containers: []corev1.Container{{
						Name: "app", Image: images.BusyboxImage, ImagePullPolicy: corev1.PullNever,
						Command:      []string{"sh", "-c", script},
						VolumeMounts: []corev1.VolumeMount{{Name: claimName, MountPath: "/data"}},
					}},
				},
			},
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{
				ObjectMeta: metav1.ObjectMeta{Name: claimName},
				Spec: corev1.PersistentVolumeClaimSpec{
					AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					StorageClassName: ptr(storageClass),
					Resources: corev1.VolumeResourceRequirements{
						Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
					},
				},
			}},
		},
	}
}

func ptr[T any](v T) *T { return &v }
