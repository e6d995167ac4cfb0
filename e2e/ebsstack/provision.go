package ebsstack

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Provision is scenario 1: a WaitForFirstConsumer ext4 class, a claim for node A, a Pod on node A; the
// volume is created in A's zone, attached as a loop device, formatted, staged and published, and a file is
// written through the published path.
func (l *Lifecycle) Provision(ctx context.Context) error {
	l.R.Scenario("1. Provision, attach, format, mount, write")
	return l.steps(ctx,
		step{"create StorageClass, PVC and Pod", l.createWriter},
		step{"PVC data-0 Bound", l.waitDataBound},
		step{"volume attached to node A", func(ctx context.Context) (string, error) {
			a, err := l.waitAttached(ctx, l.NodeA)
			if err != nil {
				return "", err
			}
			return fmt.Sprintf("%s attached to %s (%s) as %s, loop device %s", l.volumeID, l.NodeA, a.InstanceID, a.Device, a.LoopDevice), nil
		}},
		step{"Pod writer-0 Running", l.waitWriterMounted},
		step{"write a file through the published path", l.writeData})
}

func (l *Lifecycle) createWriter(ctx context.Context) (string, error) {
	_, err := l.create(ctx, filesystemClass("stowage-ext4", "ext4"),
		Claim("data-0", "stowage-ext4", "1Gi", l.NodeA, false), Pod("writer-0", l.NodeA, "data-0", false))
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("StorageClass stowage-ext4 (WaitForFirstConsumer, ext4), PVC data-0 and Pod writer-0 on %s created", l.NodeA), nil
}

// waitDataBound waits for data-0 to be Bound and records its PV and EBS volume, which must be in A's zone.
func (l *Lifecycle) waitDataBound(ctx context.Context) (string, error) {
	pv, vol, err := l.waitBound(ctx, "data-0")
	if err != nil {
		return "", err
	}
	l.pvName, l.volumeID = pv.Name, vol.ID
	if want := l.zone(l.NodeA); vol.Zone != want {
		return "", fmt.Errorf("volume %s is in %s, node %s in %s", vol.ID, vol.Zone, l.NodeA, want)
	}
	return fmt.Sprintf("PVC data-0 Bound to %s (EBS %s, %s, %d GiB, in %s)", pv.Name, vol.ID, vol.Type, vol.SizeGiB, vol.Zone), nil
}

// waitWriterMounted waits for writer-0 to run and checks that ext4 is staged and published on node A.
func (l *Lifecycle) waitWriterMounted(ctx context.Context) (string, error) {
	pod, err := l.waitRunning(ctx, "writer-0")
	if err != nil {
		return "", err
	}
	node := l.node(l.NodeA)
	if err := checkFSType(node, "staging path "+node.StagingPath(l.volumeID), node.StagingPath(l.volumeID), "ext4"); err != nil {
		return "", err
	}
	if err := checkFSType(node, "publish path", node.PublishPath(string(pod.UID), l.pvName), "ext4"); err != nil {
		return "", err
	}
	return fmt.Sprintf("Pod writer-0 Running on %s: formatted ext4, staged at globalmount, published", l.NodeA), nil
}

// writeData writes 1 MiB of random bytes through writer-0's published path and records their digest.
func (l *Lifecycle) writeData(ctx context.Context) (string, error) {
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
}

// Move is scenario 2: the Pod is deleted (unpublished, unstaged, detached), a new Pod on node B in the same
// zone gets the volume attached there and reads the same bytes.
func (l *Lifecycle) Move(ctx context.Context) error {
	l.R.Scenario("2. Detach from node A, attach to node B, data intact")
	if l.volumeID == "" {
		return fmt.Errorf("scenario 1 did not run")
	}
	if err := l.steps(ctx, step{"Pod writer-0 deleted", l.deleteWriter}, step{"volume detached from node A", l.waitDetachedFromA}); err != nil {
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
	}}, step{"file intact on node B", l.checkDataOnB})
}

// deleteWriter deletes writer-0 and checks that node A has nothing mounted once it is gone.
func (l *Lifecycle) deleteWriter(ctx context.Context) (string, error) {
	if err := l.P.KubeClient().CoreV1().Pods(Namespace).Delete(ctx, "writer-0", metav1.DeleteOptions{}); err != nil {
		return "", err
	}
	if err := l.waitPodGone(ctx, "writer-0"); err != nil {
		return "", err
	}
	// A real kubelet removes the Pod once its volumes are unpublished; unstaging may follow.
	err := poll(ctx, "no CSI mount on "+l.NodeA, func(context.Context) (bool, string, error) {
		left, err := l.node(l.NodeA).CSIMountsLeft()
		return err == nil && len(left) == 0, fmt.Sprintf("mounts left %v", left), err
	})
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("Pod writer-0 gone: unpublished and unstaged on %s", l.NodeA), nil
}

// waitDetachedFromA waits until the VolumeAttachment to node A is deleted and EC2 shows no attachment.
func (l *Lifecycle) waitDetachedFromA(ctx context.Context) (string, error) {
	va := AttachmentName(l.volumeID, l.NodeA)
	err := poll(ctx, "detach of "+l.volumeID, func(ctx context.Context) (bool, string, error) {
		_, err := l.P.KubeClient().StorageV1().VolumeAttachments().Get(ctx, va, metav1.GetOptions{})
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
}

// checkDataOnB reads data.bin through reader-0 on node B and compares it with what writer-0 wrote.
func (l *Lifecycle) checkDataOnB(ctx context.Context) (string, error) {
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
}
