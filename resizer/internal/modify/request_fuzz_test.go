package modify

import (
	"context"
	"maps"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/stowage-csi/stowage/shared/testutil"
)

// capture is a Modifier that keeps the last request.
type capture struct {
	req *csi.ControllerModifyVolumeRequest
}

func (c *capture) Modify(_ context.Context, req *csi.ControllerModifyVolumeRequest) error {
	c.req = req
	return nil
}

// FuzzModifyRequest builds ControllerModifyVolume from a VolumeAttributesClass and a PV's secret annotations,
// both written by users: no panic; the driver gets the class's parameters unchanged (with the claim's and
// volume's names under the metadata keys with --extra-modify-metadata, and those keys only then); the cached
// class is never changed; the secret is the annotations' when both are set, else the PV's expand secret.
func FuzzModifyRequest(f *testing.F) {
	f.Add("iops=4000\nthroughput=250", "", "", false)
	f.Add("type=io2\ncsi.storage.k8s.io/pvc/name=spoofed", "modify-secret", "kube-system", true)
	f.Add("", "modify-secret", "", true)
	f.Add("tagSpecification_1=a=b", "", "kube-system", false)
	secrets := []*v1.Secret{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "expand-secret"}, Data: map[string][]byte{"from": []byte("expand")}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "modify-secret"}, Data: map[string][]byte{"from": []byte("annotation")}},
	}
	client := fake.NewClientset(secrets[0], secrets[1])
	f.Fuzz(func(t *testing.T, paramsText, annName, annNS string, extra bool) {
		cls := &storagev1.VolumeAttributesClass{ObjectMeta: metav1.ObjectMeta{Name: "gold"}, DriverName: "ebs.csi.aws.com", Parameters: testutil.FuzzMap(paramsText)}
		before := maps.Clone(cls.Parameters)
		pvc := &v1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "data"}}
		pv := &v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-1", Annotations: map[string]string{SecretNameAnnotation: annName, SecretNamespaceAnnotation: annNS}}}
		pv.Spec.CSI = &v1.CSIPersistentVolumeSource{Driver: "ebs.csi.aws.com", VolumeHandle: "vol-1",
			ControllerExpandSecretRef: &v1.SecretReference{Namespace: "kube-system", Name: "expand-secret"}}
		modifier := &capture{}
		h := New(Config{Client: client, CSI: modifier, ExtraMetadata: extra})
		err := h.call(context.Background(), pvc, pv, cls)
		if !maps.Equal(cls.Parameters, before) {
			t.Fatalf("the cached class's parameters changed from %q to %q", before, cls.Parameters)
		}
		useAnnotations := annName != "" && annNS != ""
		if err != nil {
			if !useAnnotations || !strings.Contains(err.Error(), "controller-modify secret") {
				t.Fatalf("call with annotations %q/%q: %v", annNS, annName, err)
			}
			return
		}
		want := maps.Clone(before)
		if extra {
			want[PVCNameKey], want[PVCNamespaceKey], want[PVNameKey] = "data", "ns", "pv-1"
		}
		if got := modifier.req.GetMutableParameters(); !maps.Equal(got, want) && !(len(got) == 0 && len(want) == 0) {
			t.Fatalf("class %q (extra metadata %v) sent %q", before, extra, got)
		}
		wantFrom := "expand"
		if useAnnotations && annName == "modify-secret" {
			wantFrom = "annotation"
		}
		if got := modifier.req.GetSecrets()["from"]; got != wantFrom || modifier.req.GetVolumeId() != "vol-1" {
			t.Fatalf("annotations %q/%q: secret from %q, volume %q", annNS, annName, got, modifier.req.GetVolumeId())
		}
	})
}
