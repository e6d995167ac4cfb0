package labeler

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/stowage-csi/stowage/ebs-plugin/internal/cloud"
	"github.com/stowage-csi/stowage/ebs-plugin/internal/metadata"
	"github.com/stowage-csi/stowage/shared/testutil"
)

func TestLabels(t *testing.T) {
	managed := func(id string) bool { return id == "vol-csi" || id == "vol-intree" }
	for _, tc := range []struct {
		name          string
		d             cloud.InstanceDevices
		volumes, enis string
	}{
		{name: "root only", d: cloud.InstanceDevices{ENIs: 1, VolumeIDs: []string{"vol-root"}}, volumes: "0", enis: "1"},
		{name: "no mappings: 0, not upstream's -1", d: cloud.InstanceDevices{ENIs: 1}, volumes: "0", enis: "1"},
		{name: "no interfaces listed count as 1", d: cloud.InstanceDevices{VolumeIDs: []string{"vol-root"}}, volumes: "0", enis: "1"},
		{name: "launch volumes and extra ENIs", d: cloud.InstanceDevices{ENIs: 3, VolumeIDs: []string{"vol-root", "vol-data", "vol-logs"}}, volumes: "2", enis: "3"},
		{name: "PV volumes not counted", d: cloud.InstanceDevices{ENIs: 2, VolumeIDs: []string{"vol-root", "vol-csi", "vol-intree", "vol-data"}}, volumes: "1", enis: "2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Labels(tc.d, managed)
			if got[metadata.VolumesLabel] != tc.volumes || got[metadata.ENIsLabel] != tc.enis || len(got) != 2 {
				t.Fatalf("labels %v, want volumes %s enis %s", got, tc.volumes, tc.enis)
			}
		})
	}
}

// fakeInstances answers InstanceDevices from a table and records each call's IDs.
type fakeInstances struct {
	mu      sync.Mutex
	devices map[string]cloud.InstanceDevices
	calls   [][]string
}

func (f *fakeInstances) InstanceDevices(_ context.Context, ids []string) (map[string]cloud.InstanceDevices, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, slices.Sorted(slices.Values(ids)))
	out := map[string]cloud.InstanceDevices{}
	for _, id := range ids {
		if d, ok := f.devices[id]; ok {
			out[id] = d
		}
	}
	return out, nil
}

func (f *fakeInstances) callsSoFar() [][]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

func node(name, providerID string, labels map[string]string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Spec: corev1.NodeSpec{ProviderID: providerID}}
}

// TestRunLabelsNodes runs the labeler on a fake API server: the first round describes every Node's instance
// in one call and labels them, leaving out PV volumes (CSI of this driver, in-tree, not another driver's),
// skips a Node without an AWS providerID and does not write a Node whose labels are right already; a Node
// that joins later is described and labelled alone.
func TestRunLabelsNodes(t *testing.T) {
	client := fake.NewClientset(
		node("a", "aws:///us-east-1a/i-a", map[string]string{"keep": "me"}),
		node("b", "", nil),
		node("c", "aws:///us-east-1b/i-c", map[string]string{metadata.VolumesLabel: "0", metadata.ENIsLabel: "1"}),
		&corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "csi"}, Spec: corev1.PersistentVolumeSpec{PersistentVolumeSource: corev1.PersistentVolumeSource{
			CSI: &corev1.CSIPersistentVolumeSource{Driver: "ebs.csi.aws.com", VolumeHandle: "vol-csi"}}}},
		&corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "intree"}, Spec: corev1.PersistentVolumeSpec{PersistentVolumeSource: corev1.PersistentVolumeSource{
			AWSElasticBlockStore: &corev1.AWSElasticBlockStoreVolumeSource{VolumeID: "aws://us-east-1a/vol-intree"}}}},
		&corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "other"}, Spec: corev1.PersistentVolumeSpec{PersistentVolumeSource: corev1.PersistentVolumeSource{
			CSI: &corev1.CSIPersistentVolumeSource{Driver: "other.csi.example.com", VolumeHandle: "vol-other"}}}},
	)
	inst := &fakeInstances{devices: map[string]cloud.InstanceDevices{
		"i-a": {ENIs: 3, VolumeIDs: []string{"vol-root", "vol-csi", "vol-intree", "vol-other", "vol-data"}},
		"i-c": {ENIs: 1, VolumeIDs: []string{"vol-rootc"}},
		"i-d": {ENIs: 2, VolumeIDs: []string{"vol-rootd", "vol-d1"}},
	}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- (&Labeler{Client: client, Instances: inst, Driver: "ebs.csi.aws.com", Interval: time.Hour}).Run(ctx)
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()

	labelsOf := func(name string) map[string]string {
		n, err := client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return n.Labels
	}
	testutil.Eventually(t, 10*time.Second, "node a labelled", func() (bool, error) {
		return labelsOf("a")[metadata.ENIsLabel] != "", nil
	})
	// a: 5 mappings less vol-csi and vol-intree (PVs) and the root; vol-other is another driver's.
	if got := labelsOf("a"); got[metadata.VolumesLabel] != "2" || got[metadata.ENIsLabel] != "3" || got["keep"] != "me" {
		t.Fatalf("node a labels %v", got)
	}
	if got := labelsOf("b"); len(got) != 0 {
		t.Fatalf("node b without a providerID labelled: %v", got)
	}
	if calls := inst.callsSoFar(); len(calls) != 1 || !slices.Equal(calls[0], []string{"i-a", "i-c"}) {
		t.Fatalf("first round described %v, want one call for i-a and i-c", calls)
	}
	for _, a := range client.Actions() {
		if p, ok := a.(k8stesting.PatchAction); ok && p.GetName() != "a" {
			t.Fatalf("patched node %s, whose labels needed no change", p.GetName())
		}
	}

	if _, err := client.CoreV1().Nodes().Create(context.Background(), node("d", "aws:///us-east-1a/i-d", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, "new node d labelled", func() (bool, error) {
		return labelsOf("d")[metadata.ENIsLabel] == "2", nil
	})
	if got := labelsOf("d")[metadata.VolumesLabel]; got != "1" {
		t.Fatalf("node d volumes label %q, want 1", got)
	}
	if calls := inst.callsSoFar(); len(calls) != 2 || !slices.Equal(calls[1], []string{"i-d"}) {
		t.Fatalf("calls %v, want the new node described alone", calls)
	}
}
