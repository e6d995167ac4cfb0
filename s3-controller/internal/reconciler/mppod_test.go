package reconciler

import (
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/stowage-csi/stowage/shared/s3api"
)

func testPV(attrs map[string]string, mountOptions ...string) *corev1.PersistentVolume {
	pv := volumeObjs("pv", mountOptions)[0].(*corev1.PersistentVolume)
	for k, v := range attrs {
		pv.Spec.CSI.VolumeAttributes[k] = v
	}
	return pv
}

func TestBuildMountpointPodFieldByField(t *testing.T) {
	cfg := testConfig()
	cfg.PodLabels = map[string]string{"team": "storage"}
	cfg.PodAnnotations = map[string]string{"note": "x"}
	pod, err := BuildMountpointPod(cfg, "mp-abcde", "node-7", testPV(nil), ReadOnly)
	if err != nil {
		t.Fatal(err)
	}
	wantMeta := metav1.ObjectMeta{Name: "mp-abcde", GenerateName: "mp-", Namespace: testNS,
		Labels: map[string]string{"team": "storage", s3api.LabelMountpointVersion: "1.23.0", s3api.LabelMountedByVersion: testVersion},
		Annotations: map[string]string{"note": "x", s3api.AnnotationVolumeName: "pv", s3api.AnnotationVolumeID: "pv-handle",
			s3api.AnnotationDaemonSetPod: "true", AnnotationAccess: "read-only"}}
	if !reflect.DeepEqual(pod.ObjectMeta, wantMeta) {
		t.Errorf("metadata\n got %+v\nwant %+v", pod.ObjectMeta, wantMeta)
	}
	s := pod.Spec
	check := func(what string, got, want any) {
		t.Helper()
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s = %+v, want %+v", what, got, want)
		}
	}
	check("restartPolicy", s.RestartPolicy, corev1.RestartPolicyOnFailure)
	check("terminationGracePeriodSeconds", s.TerminationGracePeriodSeconds, ptr.To[int64](600))
	check("securityContext", s.SecurityContext, &corev1.PodSecurityContext{FSGroup: ptr.To[int64](1000)})
	check("nodeSelector", s.NodeSelector, map[string]string{"kubernetes.io/os": "linux"})
	check("priorityClassName", s.PriorityClassName, "mount-s3-critical")
	check("tolerations", s.Tolerations, []corev1.Toleration{{Operator: corev1.TolerationOpExists}})
	check("affinity", s.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms,
		[]corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"node-7"}}}}})
	check("serviceAccountName", s.ServiceAccountName, "")
	check("volumes", s.Volumes, []corev1.Volume{{Name: "comm", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
		Medium: corev1.StorageMediumMemory, SizeLimit: resource.NewQuantity(10*1024*1024, resource.BinarySI)}}}})
	if len(s.Containers) != 1 {
		t.Fatalf("%d containers", len(s.Containers))
	}
	c := s.Containers[0]
	check("container name", c.Name, "mountpoint")
	check("image", c.Image, "example/mounter:1")
	check("imagePullPolicy", c.ImagePullPolicy, corev1.PullIfNotPresent)
	check("command", c.Command, []string{"/bin/aws-s3-csi-mounter"})
	check("container securityContext", c.SecurityContext, &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr.To(false), Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		RunAsUser: ptr.To[int64](1000), RunAsNonRoot: ptr.To(true),
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}})
	check("volumeMounts", c.VolumeMounts, []corev1.VolumeMount{{Name: "comm", MountPath: "/comm"}})
	check("resources", c.Resources, corev1.ResourceRequirements{})
	check("env", c.Env, []corev1.EnvVar(nil))
}

func TestBuildMountpointPodFromAttributes(t *testing.T) {
	q := resource.MustParse
	tests := []struct {
		name         string
		attrs        map[string]string
		mountOptions []string
		check        func(t *testing.T, p *corev1.Pod)
		wantErr      string
	}{
		{name: "service account and resources", attrs: map[string]string{
			attrMountpointServiceAccount: "mp-sa", attrResourcesRequestsCPU: "100m", attrResourcesLimitsMemory: "1Gi"},
			check: func(t *testing.T, p *corev1.Pod) {
				r := p.Spec.Containers[0].Resources
				if p.Spec.ServiceAccountName != "mp-sa" || !reflect.DeepEqual(r.Requests, corev1.ResourceList{"cpu": q("100m")}) ||
					!reflect.DeepEqual(r.Limits, corev1.ResourceList{"memory": q("1Gi")}) {
					t.Fatalf("sa %q resources %+v", p.Spec.ServiceAccountName, r)
				}
			}},
		{name: "emptyDir cache", attrs: map[string]string{attrCache: "emptyDir", attrCacheEmptyDirSizeLimit: "2Gi", attrCacheEmptyDirMedium: "Memory"},
			check: func(t *testing.T, p *corev1.Pod) {
				lim := q("2Gi")
				want := corev1.Volume{Name: "local-cache", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: "Memory", SizeLimit: &lim}}}
				if !reflect.DeepEqual(p.Spec.Volumes[1], want) || p.Spec.Containers[0].VolumeMounts[1] != (corev1.VolumeMount{Name: "local-cache", MountPath: "/local-cache"}) {
					t.Fatalf("cache volume %+v", p.Spec.Volumes)
				}
			}},
		{name: "deprecated --cache option means emptyDir", mountOptions: []string{"cache /tmp/x"},
			check: func(t *testing.T, p *corev1.Pod) {
				if len(p.Spec.Volumes) != 2 || p.Spec.Volumes[1].EmptyDir == nil {
					t.Fatalf("volumes %+v", p.Spec.Volumes)
				}
			}},
		{name: "cache-xz is not a local cache", mountOptions: []string{"cache-xz bucket--x-s3"},
			check: func(t *testing.T, p *corev1.Pod) {
				if len(p.Spec.Volumes) != 1 {
					t.Fatalf("volumes %+v", p.Spec.Volumes)
				}
			}},
		{name: "ephemeral cache", attrs: map[string]string{attrCache: "ephemeral", attrCacheEphemeralStorageClass: "gp3", attrCacheEphemeralRequest: "5Gi"},
			check: func(t *testing.T, p *corev1.Pod) {
				tmpl := p.Spec.Volumes[1].Ephemeral.VolumeClaimTemplate
				if tmpl.Labels["s3.csi.aws.com/type"] != "local-ephemeral-cache" || *tmpl.Spec.StorageClassName != "gp3" ||
					!tmpl.Spec.Resources.Requests.Storage().Equal(q("5Gi")) || tmpl.Spec.AccessModes[0] != corev1.ReadWriteOnce {
					t.Fatalf("template %+v", tmpl)
				}
			}},
		{name: "cache both ways", attrs: map[string]string{attrCache: "emptyDir"}, mountOptions: []string{"cache /x"}, wantErr: "both"},
		{name: "ephemeral without class", attrs: map[string]string{attrCache: "ephemeral", attrCacheEphemeralRequest: "5Gi"}, wantErr: attrCacheEphemeralStorageClass},
		{name: "unknown cache", attrs: map[string]string{attrCache: "tmpfs"}, wantErr: attrCache},
		{name: "bad medium", attrs: map[string]string{attrCache: "emptyDir", attrCacheEmptyDirMedium: "HugePages"}, wantErr: attrCacheEmptyDirMedium},
		{name: "bad size", attrs: map[string]string{attrCache: "emptyDir", attrCacheEmptyDirSizeLimit: "lots"}, wantErr: attrCacheEmptyDirSizeLimit},
		{name: "bad cpu", attrs: map[string]string{attrResourcesLimitsCPU: "fast"}, wantErr: attrResourcesLimitsCPU},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := BuildMountpointPod(testConfig(), "mp-x", testNode, testPV(tt.attrs, tt.mountOptions...), ReadWrite)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one naming %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, p)
		})
	}
}

func TestHeadroomClassesUsePreemptingPriority(t *testing.T) {
	cfg := testConfig()
	cfg.PreemptingPriorityClassName, cfg.HeadroomPriorityClassName = "mount-s3-preempting-critical", "mount-s3-headroom"
	p, err := BuildMountpointPod(cfg, "mp-x", testNode, testPV(nil), ReadWrite)
	if err != nil || p.Spec.PriorityClassName != "mount-s3-preempting-critical" {
		t.Fatalf("priority %q, %v", p.Spec.PriorityClassName, err)
	}
}

func TestBadAttributesMakeAnEventOnTheWorkload(t *testing.T) {
	objs := volumeObjs("pv", nil, func(pv *corev1.PersistentVolume, _ *corev1.PersistentVolumeClaim) {
		pv.Spec.CSI.VolumeAttributes[attrCache] = "tmpfs"
	})
	a := workload("a", "pv")
	e := newEnv(t, append(objs, a)...)
	if err := e.reconcile(a); err == nil {
		t.Fatal("no error for a bad cache attribute")
	}
	select {
	case ev := <-e.events.Events:
		if !strings.Contains(ev, "MountpointPodAttachmentFailed") || !strings.Contains(ev, attrCache) {
			t.Fatalf("event %q", ev)
		}
	default:
		t.Fatal("no Event on the workload")
	}
}

func TestNewMountpointPodNameLooksGenerated(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		n := newMountpointPodName()
		if len(n) != 8 || !strings.HasPrefix(n, "mp-") || strings.ContainsAny(n[3:], "aeiou013") {
			t.Fatalf("name %q", n)
		}
		seen[n] = true
	}
	if len(seen) < 95 {
		t.Fatalf("only %d distinct names in 100", len(seen))
	}
}
