package metadata

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

type fakeIMDS map[string]string

func (f fakeIMDS) GetMetadata(_ context.Context, in *imds.GetMetadataInput, _ ...func(*imds.Options)) (*imds.GetMetadataOutput, error) {
	v, ok := f[in.Path]
	if !ok {
		return nil, errors.New("404")
	}
	return &imds.GetMetadataOutput{Content: io.NopCloser(bytes.NewBufferString(v))}, nil
}

func TestIMDSSource(t *testing.T) {
	src := &IMDS{client: fakeIMDS{
		"instance-id": "i-123", "instance-type": "m5.large", "placement/availability-zone": "us-east-1b",
		"block-device-mapping/":    "ami\nebs1\nebs2\nroot",
		"network/interfaces/macs/": "0a:00:00:00:00:01/\n0a:00:00:00:00:02/",
	}}
	inst, err := src.Get(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := Instance{InstanceID: "i-123", InstanceType: "m5.large", Region: "us-east-1", AvailabilityZone: "us-east-1b", EBSMappings: 2, ENIs: 2}
	if *inst != want {
		t.Fatalf("got %+v, want %+v", *inst, want)
	}
	if _, err := (&IMDS{client: fakeIMDS{}}).Get(context.Background()); err == nil {
		t.Fatal("empty IMDS accepted")
	}
}

type fakeNodes map[string]*corev1.Node

func (f fakeNodes) Get(_ context.Context, name string, _ metav1.GetOptions) (*corev1.Node, error) {
	if n, ok := f[name]; ok {
		return n, nil
	}
	return nil, errors.New("not found")
}

func TestKubernetesSource(t *testing.T) {
	node := func(pid string, labels map[string]string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: labels}, Spec: corev1.NodeSpec{ProviderID: pid}}
	}
	tests := []struct {
		name    string
		node    *corev1.Node
		want    string // instance ID and zone
		wantErr string
	}{
		{name: "provider ID and labels", node: node("aws:///us-west-2c/i-abc", map[string]string{corev1.LabelInstanceTypeStable: "c5.xlarge"}), want: "i-abc us-west-2c"},
		{name: "zone label wins", node: node("aws:///us-west-2c/i-abc", map[string]string{corev1.LabelTopologyZone: "us-west-2a"}), want: "i-abc us-west-2a"},
		{name: "no provider ID is an error, not a panic", node: node("", nil), wantErr: "not an AWS provider ID"},
		{name: "provider ID without instance", node: node("aws:///us-west-2c/", nil), wantErr: "instance ID"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			inst, err := NewKubernetes(fakeNodes{"n1": tc.node}, "n1").Get(context.Background())
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v", err)
				}
				return
			}
			if err != nil || inst.InstanceID+" "+inst.AvailabilityZone != tc.want {
				t.Fatalf("got %+v, %v", inst, err)
			}
		})
	}
	if _, err := NewKubernetes(fakeNodes{}, "n1").Get(context.Background()); err == nil {
		t.Fatal("missing node accepted")
	}
}

func TestSourcesFallThrough(t *testing.T) {
	s := Sources{&IMDS{client: fakeIMDS{}}, NewKubernetes(fakeNodes{"n1": {Spec: corev1.NodeSpec{ProviderID: "aws:///us-east-1a/i-9"}}}, "n1")}
	inst, err := s.Get(context.Background())
	if err != nil || inst.InstanceID != "i-9" {
		t.Fatalf("got %+v, %v", inst, err)
	}
	if _, err := ParseSources("imds,bogus"); err == nil {
		t.Fatal("bogus source accepted")
	}
}

// TestKubernetesSourceLabelerCounts checks that the metadataLabeler's labels feed the attach limit when the
// node has no IMDS, and that a malformed label falls back to upstream's assumption instead of failing.
func TestKubernetesSourceLabelerCounts(t *testing.T) {
	tests := []struct {
		name     string
		labels   map[string]string
		wantVols int
		wantENIs int
	}{
		{name: "no labels: one ENI, no launch volumes", wantVols: 0, wantENIs: 1},
		{name: "labels read", labels: map[string]string{VolumesLabel: "3", ENIsLabel: "4"}, wantVols: 3, wantENIs: 4},
		{name: "malformed labels ignored", labels: map[string]string{VolumesLabel: "many", ENIsLabel: "0"}, wantVols: 0, wantENIs: 1},
		{name: "negative volume count ignored", labels: map[string]string{VolumesLabel: "-2", ENIsLabel: "2"}, wantVols: 0, wantENIs: 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: tc.labels}, Spec: corev1.NodeSpec{ProviderID: "aws:///us-east-1a/i-9"}}
			inst, err := NewKubernetes(fakeNodes{"n1": n}, "n1").Get(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if inst.EBSMappings != tc.wantVols || inst.ENIs != tc.wantENIs {
				t.Fatalf("EBSMappings, ENIs = %d, %d; want %d, %d", inst.EBSMappings, inst.ENIs, tc.wantVols, tc.wantENIs)
			}
		})
	}
}

func TestParseSourcesMergesRepeatedFlags(t *testing.T) {
	tests := []struct {
		name    string
		flags   []string
		want    string
		wantErr string
	}{
		{name: "default", flags: []string{"imds,kubernetes"}, want: "imds,kubernetes"},
		{name: "repeated flags append in order", flags: []string{"kubernetes", "imds"}, want: "kubernetes,imds"},
		{name: "labeler is the kubernetes source, tried once", flags: []string{"imds,metadata-labeler", "kubernetes"}, want: "imds,kubernetes"},
		{name: "empty", flags: []string{"", " , "}, wantErr: "no source"},
		{name: "unknown in a later flag", flags: []string{"imds", "bogus"}, wantErr: "bogus"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseSources(tc.flags...)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || strings.Join(got, ",") != tc.want {
				t.Fatalf("got %v, %v; want %s", got, err, tc.want)
			}
		})
	}
}
