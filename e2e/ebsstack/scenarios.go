package ebsstack

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/stowage-csi/stowage/e2e/ec2sim"
)

// StepTimeout bounds each step that waits for the cluster; it covers EC2's real delays at time scale 1.
const StepTimeout = 5 * time.Minute

// Lifecycle walks EBS volumes through their life on a Stack; the e2e test and `devcluster demo` run the
// same scenarios. Scenarios 1 to 5 build on each other and run in order; scenario 6 stands alone.
type Lifecycle struct {
	S *Stack
	R *Report
	// NodeA and NodeB share a zone (the volume moves from A to B); NodeC is in another zone.
	NodeA, NodeB, NodeC string

	volumeID string
	pvName   string
	digest   string
}

// NewLifecycle uses the first three nodes of the stack as A, B and C.
func NewLifecycle(s *Stack, r *Report) (*Lifecycle, error) {
	if len(s.NodeOrder) < 3 {
		return nil, fmt.Errorf("the lifecycle needs 3 nodes, the stack has %d", len(s.NodeOrder))
	}
	l := &Lifecycle{S: s, R: r, NodeA: s.NodeOrder[0], NodeB: s.NodeOrder[1], NodeC: s.NodeOrder[2]}
	if s.Nodes[l.NodeA].Spec.Zone != s.Nodes[l.NodeB].Spec.Zone || s.Nodes[l.NodeA].Spec.Zone == s.Nodes[l.NodeC].Spec.Zone {
		return nil, fmt.Errorf("nodes %s and %s must share a zone and %s be in another", l.NodeA, l.NodeB, l.NodeC)
	}
	return l, nil
}

// step is one reported step of a scenario: run returns the line the report prints for it.
type step struct {
	name string
	run  func(ctx context.Context) (string, error)
}

// steps runs each step in order, each under its own StepTimeout, and stops at the first that fails.
func (l *Lifecycle) steps(ctx context.Context, steps ...step) error {
	for _, s := range steps {
		err := l.R.Step(ctx, s.name, func(ctx context.Context) (string, error) {
			ctx, cancel := context.WithTimeout(ctx, StepTimeout)
			defer cancel()
			return s.run(ctx)
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// Provision is scenario 1: a WaitForFirstConsumer ext4 class, a claim for node A, a Pod on node A; the
// volume is created in A's zone, attached as a loop device, formatted, staged and published, and a file is
// written through the published path.
func (l *Lifecycle) Provision(ctx context.Context) error {
	l.R.Scenario("1. Provision, attach, format, mount, write")
	return l.steps(ctx, step{"create StorageClass, PVC and Pod", func(ctx context.Context) (string, error) {
		_, err := l.create(ctx, filesystemClass("stowage-ext4", "ext4"),
			Claim("data-0", "stowage-ext4", "1Gi", l.NodeA, false), Pod("writer-0", l.NodeA, "data-0", false))
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("StorageClass stowage-ext4 (WaitForFirstConsumer, ext4), PVC data-0 and Pod writer-0 on %s created", l.NodeA), nil
	}}, step{"PVC data-0 Bound", func(ctx context.Context) (string, error) {
		pv, vol, err := l.waitBound(ctx, "data-0")
		if err != nil {
			return "", err
		}
		l.pvName, l.volumeID = pv.Name, vol.ID
		if want := l.S.Nodes[l.NodeA].Spec.Zone; vol.Zone != want {
			return "", fmt.Errorf("volume %s is in %s, node %s in %s", vol.ID, vol.Zone, l.NodeA, want)
		}
		return fmt.Sprintf("PVC data-0 Bound to %s (EBS %s, %s, %d GiB, in %s)", pv.Name, vol.ID, vol.Type, vol.SizeGiB, vol.Zone), nil
	}}, step{"volume attached to node A", func(ctx context.Context) (string, error) {
		a, err := l.waitAttached(ctx, l.NodeA)
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("%s attached to %s (%s) as %s, loop device %s", l.volumeID, l.NodeA, a.InstanceID, a.Device, a.LoopDevice), nil
	}}, step{"Pod writer-0 Running", func(ctx context.Context) (string, error) {
		pod, err := l.waitRunning(ctx, "writer-0")
		if err != nil {
			return "", err
		}
		node := l.S.Nodes[l.NodeA].Kubelet
		if err := checkFSType("staging path "+node.StagingPath(l.volumeID), node.StagingPath(l.volumeID), "ext4"); err != nil {
			return "", err
		}
		if err := checkFSType("publish path", node.PublishPath(string(pod.UID), l.pvName), "ext4"); err != nil {
			return "", err
		}
		return fmt.Sprintf("Pod writer-0 Running on %s: formatted ext4, staged at globalmount, published", l.NodeA), nil
	}}, step{"write a file through the published path", func(ctx context.Context) (string, error) {
		path, err := l.publishedFile(ctx, l.NodeA, "writer-0", "data.bin")
		if err != nil {
			return "", err
		}
		data := make([]byte, 1<<20)
		_, _ = rand.Read(data)
		if err := writeSynced(path, data); err != nil {
			return "", err
		}
		l.digest = digest(data)
		return fmt.Sprintf("Wrote 1 MiB to /data/data.bin of writer-0 (sha256 %s)", l.digest[:12]), nil
	}})
}

// Move is scenario 2: the Pod is deleted (unpublished, unstaged, detached), a new Pod on node B in the same
// zone gets the volume attached there and reads the same bytes.
func (l *Lifecycle) Move(ctx context.Context) error {
	l.R.Scenario("2. Detach from node A, attach to node B, data intact")
	kube := l.S.Client
	if l.volumeID == "" {
		return fmt.Errorf("scenario 1 did not run")
	}
	if err := l.steps(ctx, step{"Pod writer-0 deleted", func(ctx context.Context) (string, error) {
		if err := kube.CoreV1().Pods(Namespace).Delete(ctx, "writer-0", metav1.DeleteOptions{}); err != nil {
			return "", err
		}
		if err := l.waitPodGone(ctx, "writer-0"); err != nil {
			return "", err
		}
		root := l.S.Nodes[l.NodeA].Kubelet.RootDir()
		if left, err := MountsUnder(root); err != nil || len(left) > 0 {
			return "", fmt.Errorf("mounts left on %s: %v (%v)", l.NodeA, left, err)
		}
		return fmt.Sprintf("Pod writer-0 gone: unpublished and unstaged on %s", l.NodeA), nil
	}}, step{"volume detached from node A", func(ctx context.Context) (string, error) {
		va := AttachmentName(l.volumeID, l.NodeA)
		err := poll(ctx, "detach of "+l.volumeID, func(ctx context.Context) (bool, string, error) {
			_, err := kube.StorageV1().VolumeAttachments().Get(ctx, va, metav1.GetOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				return false, "", err
			}
			atts := l.attachments(l.volumeID)
			return apierrors.IsNotFound(err) && len(atts) == 0, fmt.Sprintf("VolumeAttachment present: %v, EC2 attachments %v", err == nil, atts), nil
		})
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("%s detached from %s, VolumeAttachment deleted", l.volumeID, l.NodeA), nil
	}}); err != nil {
		return err
	}
	if _, err := l.create(ctx, nil, nil, Pod("reader-0", l.NodeB, "data-0", false)); err != nil {
		return err
	}
	return l.steps(ctx, step{"Pod reader-0 Running on node B", func(ctx context.Context) (string, error) {
		a, err := l.waitAttached(ctx, l.NodeB)
		if err != nil {
			return "", err
		}
		if _, err := l.waitRunning(ctx, "reader-0"); err != nil {
			return "", err
		}
		return fmt.Sprintf("Pod reader-0 Running on %s (same zone): %s attached as %s", l.NodeB, l.volumeID, a.LoopDevice), nil
	}}, step{"file intact on node B", func(ctx context.Context) (string, error) {
		path, err := l.publishedFile(ctx, l.NodeB, "reader-0", "data.bin")
		if err != nil {
			return "", err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return "", err
		}
		if got := digest(b); got != l.digest {
			return "", fmt.Errorf("data.bin on %s has sha256 %s, written %s", l.NodeB, got, l.digest)
		}
		return fmt.Sprintf("Read /data/data.bin on %s: same 1 MiB (sha256 %s)", l.NodeB, l.digest[:12]), nil
	}})
}

// FilesystemsAndBlock is scenario 3: an xfs volume and a raw block volume on node C (another zone).
func (l *Lifecycle) FilesystemsAndBlock(ctx context.Context) error {
	l.R.Scenario("3. xfs and a raw block volume")
	zone := l.S.Nodes[l.NodeC].Spec.Zone
	return l.steps(ctx, step{"xfs volume mounted on node C", func(ctx context.Context) (string, error) {
		pv, vol, pod, err := l.createAndStart(ctx, filesystemClass("stowage-xfs", "xfs"),
			Claim("xfs-0", "stowage-xfs", "1Gi", l.NodeC, false), Pod("xfs-user", l.NodeC, "xfs-0", false),
			func(vol ec2sim.VolumeState) error {
				if vol.Zone != zone {
					return fmt.Errorf("xfs volume %s is in %s, node %s in %s", vol.ID, vol.Zone, l.NodeC, zone)
				}
				return nil
			})
		if err != nil {
			return "", err
		}
		node := l.S.Nodes[l.NodeC].Kubelet
		if err := checkFSType("staging path of "+vol.ID, node.StagingPath(vol.ID), "xfs"); err != nil {
			return "", err
		}
		path := filepath.Join(node.PublishPath(string(pod.UID), pv.Name), "hello.txt")
		want := []byte("hello from xfs\n")
		if err := writeSynced(path, want); err != nil {
			return "", err
		}
		if got, err := os.ReadFile(path); err != nil || !bytes.Equal(got, want) {
			return "", fmt.Errorf("read back %q, %v", got, err)
		}
		return fmt.Sprintf("PVC xfs-0 (EBS %s in %s) formatted xfs, mounted in xfs-user on %s, file written and read back", vol.ID, vol.Zone, l.NodeC), nil
	}}, step{"raw block volume on node C", func(ctx context.Context) (string, error) {
		pv, vol, pod, err := l.createAndStart(ctx, nil,
			Claim("block-0", "stowage-ext4", "1Gi", l.NodeC, true), Pod("block-user", l.NodeC, "block-0", true), nil)
		if err != nil {
			return "", err
		}
		dev := l.S.Nodes[l.NodeC].Kubelet.DevicePath(string(pod.UID), pv.Name)
		data := make([]byte, 64<<10)
		_, _ = rand.Read(data)
		const offset = 1 << 20
		if err := writeAt(dev, data, offset); err != nil {
			return "", err
		}
		if err := holds(dev, data, offset, "read back through "+dev+" differs from what was written"); err != nil {
			return "", err
		}
		// The bytes reached the EBS volume itself: the emulator's backing file holds them.
		if err := holds(vol.File, data, offset, "the volume file "+vol.File+" does not hold the bytes written through "+dev); err != nil {
			return "", err
		}
		return fmt.Sprintf("PVC block-0 (EBS %s) as a raw device in block-user: 64 KiB written at 1 MiB and read back", vol.ID), nil
	}})
}

// Delete is scenario 5: Pods and claims deleted; PVs and EBS volumes gone, nothing left in the emulator,
// no loop device and no mount left.
func (l *Lifecycle) Delete(ctx context.Context) error {
	l.R.Scenario("5. Delete: nothing left behind")
	kube := l.S.Client
	pods, claims := kube.CoreV1().Pods(Namespace), kube.CoreV1().PersistentVolumeClaims(Namespace)
	return l.steps(ctx, step{"Pods deleted", func(ctx context.Context) (string, error) {
		names, err := deleteAll(ctx, func(ctx context.Context) ([]string, error) {
			list, err := pods.List(ctx, metav1.ListOptions{})
			if err != nil {
				return nil, err
			}
			return objectNames(list.Items, func(p v1.Pod) string { return p.Name }), nil
		}, func(ctx context.Context, name string) error { return pods.Delete(ctx, name, metav1.DeleteOptions{}) })
		if err != nil {
			return "", err
		}
		for _, n := range names {
			if err := l.waitPodGone(ctx, n); err != nil {
				return "", err
			}
		}
		return fmt.Sprintf("Pods %s deleted: volumes unpublished and unstaged", strings.Join(names, ", ")), nil
	}}, step{"PVCs deleted, PVs gone", func(ctx context.Context) (string, error) {
		names, err := deleteAll(ctx, func(ctx context.Context) ([]string, error) {
			list, err := claims.List(ctx, metav1.ListOptions{})
			if err != nil {
				return nil, err
			}
			return objectNames(list.Items, func(c v1.PersistentVolumeClaim) string { return c.Name }), nil
		}, func(ctx context.Context, name string) error { return claims.Delete(ctx, name, metav1.DeleteOptions{}) })
		if err != nil {
			return "", err
		}
		err = poll(ctx, "PersistentVolumes gone", func(ctx context.Context) (bool, string, error) {
			pvs, err := kube.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, "", err
			}
			left := objectNames(pvs.Items, func(pv v1.PersistentVolume) string { return pv.Name + "(" + string(pv.Status.Phase) + ")" })
			return len(left) == 0, strings.Join(left, " "), nil
		})
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("PVCs %s deleted; their PVs are gone", strings.Join(names, ", ")), nil
	}}, step{"nothing left in EC2, no loop device or mount", func(ctx context.Context) (string, error) {
		err := poll(ctx, "EC2 emptied", func(ctx context.Context) (bool, string, error) {
			st, err := l.debugState(ctx)
			if err != nil {
				return false, "", err
			}
			return len(st.Volumes)+len(st.Attachments)+len(st.Snapshots) == 0,
				fmt.Sprintf("%d volumes, %d attachments, %d snapshots", len(st.Volumes), len(st.Attachments), len(st.Snapshots)), nil
		})
		if err != nil {
			return "", err
		}
		if loops := LoopDevicesUnder(l.S.Dir); len(loops) > 0 {
			return "", fmt.Errorf("loop devices left: %v", loops)
		}
		if mounts, err := MountsUnder(l.S.Dir); err != nil || len(mounts) > 0 {
			return "", fmt.Errorf("mounts left: %v (%v)", mounts, err)
		}
		vas, err := kube.StorageV1().VolumeAttachments().List(ctx, metav1.ListOptions{})
		if err != nil || len(vas.Items) > 0 {
			return "", fmt.Errorf("VolumeAttachments left: %d (%v)", len(vas.Items), err)
		}
		return "GET /debug/state: EC2 holds no volume, attachment or snapshot; no loop device, mount or VolumeAttachment left", nil
	}})
}

// BadParameter is scenario 6: a StorageClass with an invalid parameter gets a ProvisioningFailed Event
// naming it, and nothing is created in EC2.
func (l *Lifecycle) BadParameter(ctx context.Context) error {
	l.R.Scenario("6. Bad StorageClass parameter")
	kube := l.S.Client
	return l.steps(ctx, step{"ProvisioningFailed names the parameter", func(ctx context.Context) (string, error) {
		claim, err := l.create(ctx, StorageClass("stowage-bad", map[string]string{"type": "gp9"}),
			Claim("bad-0", "stowage-bad", "1Gi", l.NodeA, false), nil)
		if err != nil {
			return "", err
		}
		var message string
		err = poll(ctx, "ProvisioningFailed Event on bad-0", func(ctx context.Context) (bool, string, error) {
			evs, err := kube.CoreV1().Events(Namespace).List(ctx, metav1.ListOptions{
				FieldSelector: fields.Set{"involvedObject.name": "bad-0", "reason": "ProvisioningFailed"}.String()})
			if err != nil {
				return false, "", err
			}
			for _, e := range evs.Items {
				if strings.Contains(e.Message, `"type"`) && strings.Contains(e.Message, "gp9") {
					message = e.Message
					return true, "", nil
				}
			}
			return false, fmt.Sprintf("%d ProvisioningFailed events", len(evs.Items)), nil
		})
		if err != nil {
			return "", err
		}
		for _, v := range l.S.EC2.State().Volumes {
			if v.Tags["CSIVolumeName"] == "pvc-"+string(claim.UID) {
				return "", fmt.Errorf("volume %s was created for the bad claim", v.ID)
			}
		}
		c, err := kube.CoreV1().PersistentVolumeClaims(Namespace).Get(ctx, "bad-0", metav1.GetOptions{})
		if err != nil || c.Status.Phase != v1.ClaimPending {
			return "", fmt.Errorf("claim bad-0 is %v (%v), want Pending", c.Status.Phase, err)
		}
		if err := kube.CoreV1().PersistentVolumeClaims(Namespace).Delete(ctx, "bad-0", metav1.DeleteOptions{}); err != nil {
			return "", err
		}
		if err := kube.StorageV1().StorageClasses().Delete(ctx, "stowage-bad", metav1.DeleteOptions{}); err != nil {
			return "", err
		}
		return fmt.Sprintf("ProvisioningFailed: %s; no EBS volume created", trimMessage(message)), nil
	}})
}

// KeepInUse is what `devcluster demo --keep` leaves behind: PVC data-1 in use by Pod app-1 on node A. It
// needs the ext4 class of scenario 1.
func (l *Lifecycle) KeepInUse(ctx context.Context) error {
	l.R.Scenario("Kept running: PVC data-1 in use by Pod app-1 on " + l.NodeA)
	return l.steps(ctx, step{"Pod app-1 Running", func(ctx context.Context) (string, error) {
		if _, err := l.create(ctx, nil, Claim("data-1", "stowage-ext4", "1Gi", l.NodeA, false), Pod("app-1", l.NodeA, "data-1", false)); err != nil {
			return "", err
		}
		pod, err := l.waitRunning(ctx, "app-1")
		if err != nil {
			return "", err
		}
		claim, err := l.S.Client.CoreV1().PersistentVolumeClaims(Namespace).Get(ctx, "data-1", metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("Pod app-1 Running on %s with PVC data-1 (%s) published at %s", l.NodeA, claim.Spec.VolumeName,
			l.S.Nodes[l.NodeA].Kubelet.PublishPath(string(pod.UID), claim.Spec.VolumeName)), nil
	}})
}

// debugState reads the emulator's state over HTTP, as a user would with curl.
func (l *Lifecycle) debugState(ctx context.Context) (ec2sim.StateDump, error) {
	var st ec2sim.StateDump
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, l.S.EC2.URL()+"/debug/state", nil)
	if err != nil {
		return st, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return st, fmt.Errorf("GET /debug/state: %s", resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return st, fmt.Errorf("GET /debug/state: %w", err)
	}
	return st, nil
}

func trimMessage(m string) string {
	if i := strings.Index(m, "parameter "); i >= 0 {
		m = m[i:]
	}
	if len(m) > 120 {
		m = m[:120] + "..."
	}
	return m
}
