package kubeletsim

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// setUp brings one volume of a Pod to published: attached (when required), staged (when the plugin stages),
// published with the kubelet's volume context, and the Pod's fsGroup applied.
func (n *Node) setUp(ctx context.Context, pod *v1.Pod, pv *podVolume, driver *storagev1.CSIDriver) error {
	v := pv.vol
	lock := n.state.volumeLock(v.unique)
	lock.Lock()
	defer lock.Unlock()
	if pv.published {
		return nil
	}
	var publishCtx map[string]string
	if !v.inline && attachRequired(driver) {
		var err error
		if publishCtx, err = n.waitAttached(v); err != nil {
			return err
		}
	}
	staging := ""
	if n.caps.stage && !v.inline {
		var err error
		if staging, err = n.stage(ctx, v, publishCtx); err != nil {
			return err
		}
		if !pv.stagedFor {
			n.state.update(func() {
				n.state.staged[v.unique].users[pod.UID] = true
				pv.stagedFor = true
			})
		}
	}
	target, err := n.publish(ctx, pod, v, driver, publishCtx, staging)
	if err != nil {
		return err
	}
	n.state.update(func() {
		pv.published, pv.target = true, target
	})
	n.log.V(2).Info("Volume published", "pod", pod.Namespace+"/"+pod.Name, "volume", v.handle, "target", target)
	return nil
}

// publish calls NodePublishVolume for the Pod's volume with the volume context and secrets the kubelet
// sends, applies the Pod's fsGroup when the kubelet does it itself, links a block volume into the Pod's
// directory, and returns the target path.
func (n *Node) publish(ctx context.Context, pod *v1.Pod, v *volume, driver *storagev1.CSIDriver, publishCtx map[string]string, staging string) (string, error) {
	target := n.paths.publishPath(pod.UID, v.specName)
	if v.block {
		target = n.paths.blockPublishPath(v.specName, pod.UID)
	}
	if err := os.MkdirAll(filepath.Dir(target), 0o750); err != nil {
		return "", fmt.Errorf("create parent of %s: %w", target, err)
	}
	tokens, err := n.tokens(ctx, pod, driver)
	if err != nil {
		return "", err
	}
	volCtx, err := publishContext(v, driver, pod, tokens)
	if err != nil {
		return "", err
	}
	secrets, err := n.secrets(ctx, v.publishRef)
	if err != nil {
		return "", err
	}
	if secrets, err = publishSecrets(secrets, driver, tokens); err != nil {
		return "", err
	}
	action := fsGroupFor(v, driver, pod, n.caps.mountGroup)
	mountGroup := ""
	if action == fsGroupDelegate {
		mountGroup = strconv.FormatInt(*pod.Spec.SecurityContext.FSGroup, 10)
	}
	callCtx, cancel := context.WithTimeout(ctx, csiTimeout)
	defer cancel()
	_, err = n.node.NodePublishVolume(callCtx, &csi.NodePublishVolumeRequest{
		VolumeId: v.handle, PublishContext: publishCtx, StagingTargetPath: staging, TargetPath: target,
		VolumeCapability: v.capability(n.caps.multiWriter, mountGroup), Readonly: v.readOnly,
		Secrets: secrets, VolumeContext: volCtx,
	})
	if err != nil {
		return "", fmt.Errorf("NodePublishVolume %s at %s: %w", v.handle, target, err)
	}
	if action == fsGroupChown {
		if err := setOwnership(target, *pod.Spec.SecurityContext.FSGroup); err != nil {
			return "", fmt.Errorf("apply fsGroup to %s: %w", target, err)
		}
	}
	if v.block {
		link := n.paths.podDevicePath(pod.UID, v.specName)
		if err := os.MkdirAll(filepath.Dir(link), 0o750); err != nil {
			return "", err
		}
		_ = os.Remove(link)
		if err := os.Symlink(target, link); err != nil {
			return "", fmt.Errorf("link %s: %w", link, err)
		}
	}
	return target, nil
}

// waitAttached checks what the kubelet waits for before mounting an attachable volume: the attach-detach
// controller lists it in node.status.volumesAttached, and its VolumeAttachment is attached. It returns the
// attachment metadata, which becomes the publish context.
func (n *Node) waitAttached(v *volume) (map[string]string, error) {
	node, err := n.nodes.Get(n.cfg.NodeName)
	if err != nil {
		return nil, waiting("node not in cache: %v", err)
	}
	listed := false
	for _, a := range node.Status.VolumesAttached {
		if string(a.Name) == v.unique {
			listed = true
		}
	}
	if !listed {
		return nil, waiting("volume %s not in node.status.volumesAttached", v.handle)
	}
	name := attachmentName(v.handle, v.driver, n.cfg.NodeName)
	va, err := n.attachment.Get(name)
	if err != nil {
		return nil, waiting("volumeattachment %s: %v", name, err)
	}
	if !va.Status.Attached {
		return nil, waiting("volumeattachment %s not attached", name)
	}
	return va.Status.AttachmentMetadata, nil
}

// stage calls NodeStageVolume once per volume and node; the caller holds the volume's lock.
func (n *Node) stage(ctx context.Context, v *volume, publishCtx map[string]string) (string, error) {
	if s := n.state.stagedVolume(v.unique); s != nil {
		return s.path, nil
	}
	path := n.paths.stagingPath(v.driver, v.handle)
	if v.block {
		path = n.paths.blockStagingPath(v.specName)
	}
	if err := os.MkdirAll(path, 0o750); err != nil {
		return "", fmt.Errorf("create staging path %s: %w", path, err)
	}
	secrets, err := n.secrets(ctx, v.stageRef)
	if err != nil {
		return "", err
	}
	callCtx, cancel := context.WithTimeout(ctx, csiTimeout)
	defer cancel()
	start := time.Now()
	_, err = n.node.NodeStageVolume(callCtx, &csi.NodeStageVolumeRequest{
		VolumeId: v.handle, PublishContext: publishCtx, StagingTargetPath: path,
		VolumeCapability: v.capability(n.caps.multiWriter, ""), Secrets: secrets, VolumeContext: v.attributes,
	})
	if err != nil {
		return "", fmt.Errorf("NodeStageVolume %s at %s: %w", v.handle, path, err)
	}
	n.state.update(func() {
		n.state.staged[v.unique] = &stagedVolume{vol: v, path: path, users: map[types.UID]bool{}}
	})
	n.log.V(2).Info("Volume staged", "volume", v.handle, "path", path, "took", time.Since(start).Round(time.Millisecond))
	return path, nil
}

// secrets reads a Secret's data for a node call; nil ref means no secrets.
func (n *Node) secrets(ctx context.Context, ref *v1.SecretReference) (map[string]string, error) {
	if ref == nil {
		return nil, nil
	}
	s, err := n.client.CoreV1().Secrets(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, waiting("secret %s/%s does not exist", ref.Namespace, ref.Name)
	}
	if err != nil {
		return nil, fmt.Errorf("read secret %s/%s: %w", ref.Namespace, ref.Name, err)
	}
	out := make(map[string]string, len(s.Data))
	for k, val := range s.Data {
		out[k] = string(val)
	}
	return out, nil
}

// tokens requests a token bound to the Pod for each audience the CSIDriver asks for.
func (n *Node) tokens(ctx context.Context, pod *v1.Pod, driver *storagev1.CSIDriver) (map[string]serviceAccountToken, error) {
	if driver == nil || len(driver.Spec.TokenRequests) == 0 {
		return nil, nil
	}
	sa := pod.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	out := map[string]serviceAccountToken{}
	for _, tr := range driver.Spec.TokenRequests {
		req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
			ExpirationSeconds: tr.ExpirationSeconds,
			BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
		}}
		if tr.Audience != "" {
			req.Spec.Audiences = []string{tr.Audience}
		}
		resp, err := n.client.CoreV1().ServiceAccounts(pod.Namespace).CreateToken(ctx, sa, req, metav1.CreateOptions{})
		if err != nil {
			return nil, fmt.Errorf("token for service account %s/%s, audience %q: %w", pod.Namespace, sa, tr.Audience, err)
		}
		out[tr.Audience] = serviceAccountToken{Token: resp.Status.Token, ExpirationTimestamp: resp.Status.ExpirationTimestamp.UTC().Format(time.RFC3339)}
	}
	return out, nil
}

// setOwnership gives a published volume to the Pod's fsGroup as the kubelet does: group ownership, group
// read-write on everything, group execute and setgid on directories.
func setOwnership(root string, gid int64) error {
	return filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := os.Lchown(path, -1, int(gid)); err != nil {
			return err
		}
		if d.Type()&fs.ModeSymlink != 0 {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		mode := info.Mode() | 0o060
		if d.IsDir() {
			mode |= os.ModeSetgid | 0o010
		}
		return os.Chmod(path, mode)
	})
}
