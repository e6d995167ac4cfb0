package metadata

import (
	"context"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/klog/v2"
)

// checkAnswer holds both sources to what the node registers with: an instance ID in EC2's syntax (the node
// ID ControllerPublish checks), a zone (the topology), trimmed values, and counts that cannot be negative.
func checkAnswer(t *testing.T, from string, inst *Instance) {
	t.Helper()
	rest, ok := strings.CutPrefix(inst.InstanceID, "i-")
	if !ok || rest == "" || len(rest) > 32 || strings.IndexFunc(rest, func(r rune) bool {
		return !(r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z')
	}) >= 0 {
		t.Fatalf("%s: accepted the instance ID %q", from, inst.InstanceID)
	}
	if inst.AvailabilityZone == "" {
		t.Fatalf("%s: accepted no zone", from)
	}
	for _, v := range []string{inst.InstanceType, inst.AvailabilityZone, inst.Region, inst.OutpostARN} {
		if strings.TrimSpace(v) != v {
			t.Fatalf("%s: kept blanks around %q", from, v)
		}
	}
	if inst.EBSMappings < -1 || inst.ENIs < 0 {
		t.Fatalf("%s: counted %d launch volumes and %d interfaces", from, inst.EBSMappings, inst.ENIs)
	}
}

// FuzzIMDS answers the node's instance metadata queries with anything (IMDS can be an impostor on the pod
// network, or an emulator): no answer panics the node, and what it accepts meets checkAnswer; an unanswered
// query for the ID or the zone is an error that names it.
func FuzzIMDS(f *testing.F) {
	f.Add("i-0123456789abcdef0", "m5.large", "us-east-1b", "us-east-1", "", "ami\nebs1\nebs2\nroot", "0a:00:00:00:00:01/\n0a:00:00:00:00:02/", uint8(0))
	f.Add("i-1\n", " m5.large ", "us-east-1b", "", "arn:aws:outposts:us-east-1:1:outpost/op-1", "", "", uint8(0x08))
	f.Add("", "t3.micro", "", "", "", "", "", uint8(0))
	f.Add("i-", "t3.micro", "z", "", "", "", "", uint8(0))
	f.Add("i-a/b", "t3.micro", "1", "", "", "", "", uint8(0x7f))
	f.Fuzz(func(t *testing.T, id, typ, zone, region, outpost, bdm, macs string, missing uint8) {
		answers := fakeIMDS{}
		for i, kv := range [][2]string{
			{"instance-id", id}, {"instance-type", typ}, {"placement/availability-zone", zone}, {"placement/region", region},
			{"outpost-arn", outpost}, {"block-device-mapping/", bdm}, {"network/interfaces/macs/", macs},
		} {
			if missing&(1<<i) == 0 {
				answers[kv[0]] = kv[1]
			}
		}
		inst, err := (&IMDS{client: answers}).Get(context.Background())
		if err != nil {
			return
		}
		checkAnswer(t, "IMDS", inst)
		if inst.InstanceID != strings.TrimSpace(id) || inst.AvailabilityZone != strings.TrimSpace(zone) {
			t.Fatalf("IMDS answered %q in %q, the node took %q in %q", id, zone, inst.InstanceID, inst.AvailabilityZone)
		}
	})
}

// FuzzKubernetesSource reads the instance from a Node object's providerID and labels, which the cloud provider,
// the labeler or an administrator wrote: no Node panics the node plugin, and what it accepts meets checkAnswer
// with the labeler's counts at their floors.
func FuzzKubernetesSource(f *testing.F) {
	f.Add("aws:///us-west-2c/i-abc", "", "m5.large", "", "2", "3")
	f.Add("aws:///us-west-2c/i-abc", "us-west-2a", "", "us-west-2", "-1", "0")
	f.Add("aws:///i-abc", "", "", "", "x", "")
	f.Add("aws:///us-west-2c/i-", "", "", "", "", "")
	f.Add("aws:///", "", "", "", "", "")
	f.Add("gce://p/z/n", "z", "", "", "", "")
	f.Add("aws://i-0", "0", " ", "0", "0", "0")
	f.Add("aws://i-0/", "0", "", "0", "0", "0")
	f.Fuzz(func(t *testing.T, providerID, zone, typ, region, volumes, enis string) {
		labels := map[string]string{}
		for k, v := range map[string]string{corev1.LabelTopologyZone: zone, corev1.LabelInstanceTypeStable: typ, corev1.LabelTopologyRegion: region, VolumesLabel: volumes, ENIsLabel: enis} {
			if len(validation.IsValidLabelValue(v)) > 0 {
				return // the API server keeps such a label off every Node
			}
			if v != "" {
				labels[k] = v
			}
		}
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: labels}, Spec: corev1.NodeSpec{ProviderID: providerID}}
		// The source logs each label it ignores; 20,000 runs need not print them.
		ctx := klog.NewContext(context.Background(), logr.Discard())
		inst, err := NewKubernetes(fakeNodes{"n1": node}, "n1").Get(ctx)
		if err != nil {
			if !strings.Contains(err.Error(), "node n1") {
				t.Fatalf("Node %q: %v: the error does not name the node", providerID, err)
			}
			return
		}
		checkAnswer(t, "Node "+providerID, inst)
		// The ID is the provider ID's last segment; slashes around it are trimmed ("aws://i-0/").
		if inst.ENIs < 1 || inst.EBSMappings < 0 || !strings.HasSuffix(strings.TrimRight(providerID, "/"), inst.InstanceID) {
			t.Fatalf("Node %q with labels %q gave %+v", providerID, labels, inst)
		}
	})
}
