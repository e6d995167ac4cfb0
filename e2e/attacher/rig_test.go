//go:build e2e || bench

package attacher

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/stowage-csi/stowage/e2e/cluster"
	"github.com/stowage-csi/stowage/e2e/cluster/clustertest"
	e2erig "github.com/stowage-csi/stowage/e2e/rig"
)

const (
	// attacherNamespace and attacherSA are the ServiceAccount of deploy/rbac/csi-attacher.yaml.
	attacherNamespace = "kube-system"
	attacherSA        = "csi-attacher"
	attacherUser      = "system:serviceaccount:" + attacherNamespace + ":" + attacherSA
	rbacFile          = "../../deploy/rbac/csi-attacher.yaml"
	startTimeout      = 20 * time.Minute
)

// auditPolicy records every write to VolumeAttachments and PersistentVolumes (and their status), once
// per request when its response is sent.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived", "ResponseStarted", "Panic"]
rules:
- level: Metadata
  verbs: ["create", "update", "patch", "delete", "deletecollection"]
  resources:
  - group: "storage.k8s.io"
    resources: ["volumeattachments", "volumeattachments/status"]
  - group: ""
    resources: ["persistentvolumes", "persistentvolumes/status"]
- level: None
`

// rig is one control plane with an audit log, the csi-attacher binary and its RBAC applied.
type rig struct {
	cluster    *cluster.Cluster
	client     kubernetes.Interface
	auditLog   string
	binary     string
	kubeconfig string
}

func startRig(t *testing.T) *rig {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	dir := t.TempDir()
	policy := filepath.Join(dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o644); err != nil {
		t.Fatal(err)
	}
	r := &rig{auditLog: filepath.Join(dir, "audit.log"), binary: buildAttacher(t, dir)}
	c := clustertest.StartWith(t, cluster.Options{APIServerArgs: []string{
		"--audit-policy-file=" + policy,
		"--audit-log-path=" + r.auditLog,
		"--audit-log-mode=blocking",
	}})
	r.cluster, r.client = c, c.Client()
	if err := c.Apply(ctx, rbacFile); err != nil {
		t.Fatalf("apply %s: %v", rbacFile, err)
	}
	kubeconfig, err := c.ServiceAccountKubeconfig(ctx, attacherNamespace, attacherSA)
	if err != nil {
		t.Fatal(err)
	}
	r.kubeconfig = kubeconfig
	return r
}

// buildAttacher builds the attacher module's csi-attacher into dir with a version stamp.
func buildAttacher(t *testing.T, dir string) string {
	t.Helper()
	root, err := e2erig.RepoRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	bin, err := e2erig.BuildCommand(context.Background(), root, "attacher", "csi-attacher", dir)
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// startAttacher runs csi-attacher against endpoint as the attacher's ServiceAccount. It is killed when
// the test ends, if it is still running, and its log is printed if the test failed.
func (r *rig) startAttacher(t *testing.T, name, endpoint string, args ...string) *e2erig.Process {
	t.Helper()
	args = append([]string{
		"--kubeconfig=" + r.kubeconfig,
		"--csi-address=" + endpoint,
		"--leader-election",
		"--leader-election-namespace=" + attacherNamespace,
		"-v=2",
	}, args...)
	p, err := e2erig.Start(e2erig.Spec{Name: name, Path: r.binary, Args: args, LogDir: t.TempDir()})
	if err != nil {
		t.Fatalf("start csi-attacher: %v", err)
	}
	t.Cleanup(func() {
		p.Signal(syscall.SIGKILL)
		<-p.Done()
		if t.Failed() {
			t.Logf("%s log:\n%s", name, p.Tail(40))
		}
	})
	return p
}

// auditEvent is the part of an audit.k8s.io/v1 Event the tests read.
type auditEvent struct {
	Verb      string                    `json:"verb"`
	Stage     string                    `json:"stage"`
	User      struct{ Username string } `json:"user"`
	ObjectRef struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
		Name        string `json:"name"`
	} `json:"objectRef"`
	ResponseStatus struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
}

// auditWrites reads the audit log and returns the write requests made by user (every user when empty),
// in order, as "verb resource[/subresource] name code".
func (r *rig) auditWrites(t *testing.T, user string) []string {
	t.Helper()
	f, err := os.Open(r.auditLog)
	if err != nil {
		t.Fatalf("audit log: %v", err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var ev auditEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("audit log line %q: %v", sc.Text(), err)
		}
		if ev.Stage != "ResponseComplete" || (user != "" && ev.User.Username != user) {
			continue
		}
		res := ev.ObjectRef.Resource
		if ev.ObjectRef.Subresource != "" {
			res += "/" + ev.ObjectRef.Subresource
		}
		out = append(out, fmt.Sprintf("%s %s %s %d %s", ev.Verb, res, ev.ObjectRef.Name, ev.ResponseStatus.Code, ev.User.Username))
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("audit log: %v", err)
	}
	return out
}

// since returns the entries of now that were not in before (the log only grows).
func since(before, now []string) []string { return now[len(before):] }

// freePort returns a free 127.0.0.1 port for an --http-endpoint.
func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// objects for a node and CSI volumes of one driver

func nodeObjects(node, driver, nodeID string) (*corev1.Node, *storagev1.CSINode) {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{
			Name: node,
			// kube-controller-manager attaches volumes only for nodes that opt in, as kubelet does.
			Annotations: map[string]string{"volumes.kubernetes.io/controller-managed-attach-detach": "true"},
		}},
		&storagev1.CSINode{
			ObjectMeta: metav1.ObjectMeta{Name: node},
			Spec:       storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{{Name: driver, NodeID: nodeID}}},
		}
}

func csiPV(name, driver, handle string) *corev1.PersistentVolume {
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
				Driver: driver, VolumeHandle: handle, FSType: "ext4",
			}},
		},
	}
}

func directVA(name, driver, pv, node string) *storagev1.VolumeAttachment {
	return &storagev1.VolumeAttachment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: storagev1.VolumeAttachmentSpec{
			Attacher: driver, NodeName: node,
			Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: &pv},
		},
	}
}

// attachedCount counts the VolumeAttachments of driver that are attached, and all of them.
func attachedCount(ctx context.Context, client kubernetes.Interface, driver string) (attached, total int, err error) {
	list, err := client.StorageV1().VolumeAttachments().List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return 0, 0, err
	}
	for _, va := range list.Items {
		if va.Spec.Attacher != driver {
			continue
		}
		total++
		if va.Status.Attached {
			attached++
		}
	}
	return attached, total, nil
}

// mutexed string list for hooks
type recorder struct {
	mu    sync.Mutex
	items []string
}

func (r *recorder) add(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.items = append(r.items, s)
}

func (r *recorder) list() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.items...)
}
