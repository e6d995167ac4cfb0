package reconciler

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func headroomEnv(t *testing.T, on bool) (*env, *corev1.Pod) {
	t.Helper()
	pv := volumeObjs("pv", nil, func(pv *corev1.PersistentVolume, _ *corev1.PersistentVolumeClaim) {
		pv.Spec.CSI.VolumeAttributes[attrResourcesRequestsMemory] = "64Mi"
	})
	w := workload("w", "pv", func(p *corev1.Pod) {
		p.Spec.NodeName = ""
		p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "other"}, {Name: GateReserveHeadroom}}
	})
	e := newEnv(t, append(pv, w)...)
	if on {
		cfg := testConfig()
		cfg.PreemptingPriorityClassName, cfg.HeadroomPriorityClassName = "mount-s3-preempting-critical", "mount-s3-headroom"
		cfg.HeadroomImage = "pause:3.10"
		cfg.HeadroomPodLabels = map[string]string{"team": "x"}
		e.r.cfg = cfg
	}
	return e, w
}

func TestHeadroomReservedThenUngated(t *testing.T) {
	e, w := headroomEnv(t, true)
	e.mustReconcile(w)
	hr := e.pod(testNS, headroomPodName("uid-w", "pv"))
	if hr == nil {
		t.Fatalf("no headroom Pod %s", headroomPodName("uid-w", "pv"))
	}
	term := hr.Spec.Affinity.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution[0]
	c := hr.Spec.Containers[0]
	if hr.Labels[labelHeadroomForPod] != "uid-w" || hr.Labels[labelHeadroomForVolume] != "pv" || hr.Labels["team"] != "x" ||
		hr.Spec.PriorityClassName != "mount-s3-headroom" || term.TopologyKey != "kubernetes.io/hostname" ||
		term.LabelSelector.MatchExpressions[0].Key != labelHeadroomForWorkload || term.LabelSelector.MatchExpressions[0].Values[0] != "uid-w" ||
		term.Namespaces[0] != "default" || c.Image != "pause:3.10" || !c.Resources.Requests.Memory().Equal(resource.MustParse("64Mi")) ||
		hr.Spec.Tolerations[0].Operator != corev1.TolerationOpExists {
		t.Fatalf("headroom Pod %+v", hr)
	}
	got := e.pod("default", "w")
	if got.Labels[labelHeadroomForWorkload] != "uid-w" || len(got.Spec.SchedulingGates) != 1 || got.Spec.SchedulingGates[0].Name != "other" {
		t.Fatalf("workload labels %v gates %v", got.Labels, got.Spec.SchedulingGates)
	}
	if len(e.attachments()) != 0 {
		t.Fatal("attachment before the workload is scheduled")
	}

	// Scheduled and running: the headroom is no longer needed.
	got.Spec.NodeName = testNode
	if err := e.c.Update(context.Background(), got); err != nil {
		t.Fatal(err)
	}
	e.setPhase(got, corev1.PodRunning)
	e.mustReconcile(e.pod("default", "w"))
	if e.pod(testNS, hr.Name) != nil {
		t.Fatal("headroom Pod kept after the workload left Pending")
	}
}

func TestHeadroomOffLeavesGatedWorkloads(t *testing.T) {
	e, w := headroomEnv(t, false)
	e.mustReconcile(w)
	if len(e.mountpointPods()) != 0 || len(e.pod("default", "w").Spec.SchedulingGates) != 2 {
		t.Fatal("headroom acted while disabled")
	}
}

func TestStaleHeadroomDeleted(t *testing.T) {
	e, w := headroomEnv(t, true)
	e.mustReconcile(w)
	if err := e.c.Delete(context.Background(), e.pod("default", "w")); err != nil {
		t.Fatal(err)
	}
	if err := e.r.CleanStale(context.Background()); err != nil {
		t.Fatal(err)
	}
	if e.pod(testNS, headroomPodName("uid-w", "pv")) != nil {
		t.Fatal("headroom Pod of a deleted workload kept")
	}
}
