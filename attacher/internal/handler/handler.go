// Package handler holds what the attacher does with one VolumeAttachment or PersistentVolume: the CSI
// handler (attach, detach, ListVolumes reconcile) for drivers with ControllerPublish, and the trivial
// handler for drivers without it. The controller picks one at start-up and calls it from its workers.
package handler

import (
	"context"
	"strings"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
)

const (
	// NodeIDAnnotation is upstream's annotation for the CSI node ID a VolumeAttachment was attached to;
	// both upstream and Stowage fall back to it when the CSINode is gone.
	NodeIDAnnotation = "csi.alpha.kubernetes.io/node-id"
	// VolumeHandleAnnotation records the CSI volume handle a VolumeAttachment was published with, so a
	// detach needs neither the PersistentVolume nor a finalizer on it.
	VolumeHandleAnnotation = "attacher.stowage-csi.io/volume-handle"
	// PublishSecretAnnotation records the controller-publish secret ("namespace/name") used for the attach,
	// for the same reason.
	PublishSecretAnnotation = "attacher.stowage-csi.io/publish-secret"

	// staleRetry is how soon a worker looks again at an object whose cached copy predates our own write.
	staleRetry = 100 * time.Millisecond
)

// FinalizerName is the finalizer upstream's external-attacher puts on VolumeAttachments (and on
// PersistentVolumes) for driver: "external-attacher/" plus the driver name with "." and "/" as "-".
func FinalizerName(driver string) string {
	return "external-attacher/" + strings.NewReplacer(".", "-", "/", "-").Replace(driver)
}

// Publisher is the CSI side of attaching: the calls the CSI handler makes over the driver's socket.
type Publisher interface {
	Publish(ctx context.Context, req *csi.ControllerPublishVolumeRequest) (map[string]string, error)
	Unpublish(ctx context.Context, req *csi.ControllerUnpublishVolumeRequest) error
	ListPublished(ctx context.Context) (map[string][]string, error)
}

// Capabilities are the driver's controller capabilities that change what the CSI handler sends.
type Capabilities struct {
	PublishReadOnly       bool // PUBLISH_READONLY: without it readonly is always false
	SingleNodeMultiWriter bool // SINGLE_NODE_MULTI_WRITER: changes the RWO/RWOP access mode mapping
	ListPublishedNodes    bool // LIST_VOLUMES and LIST_VOLUMES_PUBLISHED_NODES: enables the reconcile
}

// Config is what both handlers need.
type Config struct {
	Driver        string
	Client        kubernetes.Interface
	PVLister      corelisters.PersistentVolumeLister
	CSINodeLister storagelisters.CSINodeLister
	VALister      storagelisters.VolumeAttachmentLister
	CSI           Publisher
	Capabilities  Capabilities
	DefaultFSType string
	// OmitErrorCode leaves the gRPC code out of attachError and detachError, as upstream does with its
	// MutableCSINodeAllocatableCount gate off.
	OmitErrorCode bool
	// Now stamps attach and detach errors; tests set it, nil means time.Now.
	Now func() time.Time
}

func (c *Config) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

// handles reports whether va belongs to this driver.
func (c *Config) handles(va *storagev1.VolumeAttachment) bool {
	return va.Spec.Attacher == c.Driver
}
