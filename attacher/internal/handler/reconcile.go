package handler

import (
	"context"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"
)

func labelsEverything() labels.Selector { return labels.Everything() }

// Reconcile compares what Kubernetes shows attached with what the driver reports published (ListVolumes
// with published node IDs) and returns the VolumeAttachments to sync again: attached in Kubernetes but
// not in the driver. Their next sync calls ControllerPublish again. It writes nothing to the API.
func (h *CSI) Reconcile(ctx context.Context) ([]string, error) {
	if !h.cfg.Capabilities.ListPublishedNodes {
		return nil, nil
	}
	logger := klog.FromContext(ctx)
	published, err := h.cfg.CSI.ListPublished(ctx)
	if err != nil {
		return nil, fmt.Errorf("ListVolumes: %w", err)
	}
	vas, err := h.cfg.VALister.List(labelsEverything())
	if err != nil {
		return nil, fmt.Errorf("listing volumeattachments: %w", err)
	}
	var resync []string
	for _, va := range vas {
		if !h.cfg.handles(va) || !va.Status.Attached || va.DeletionTimestamp != nil {
			continue
		}
		handle := va.Annotations[VolumeHandleAnnotation]
		if handle == "" {
			vol, err := h.resolveVolume(logger, va)
			if err != nil {
				logger.V(4).Info("Skipping in reconcile", "volumeattachment", va.Name, "err", err)
				continue
			}
			handle = vol.spec.CSI.VolumeHandle
		}
		nodeID, err := h.nodeIDForDetach(va)
		if err != nil {
			logger.V(4).Info("Skipping in reconcile", "volumeattachment", va.Name, "err", err)
			continue
		}
		if slices.Contains(published[handle], nodeID) {
			continue
		}
		logger.Info("Driver reports the volume not published; attaching again", "volumeattachment", va.Name, "volumeID", handle, "nodeID", nodeID)
		h.setForced(va.Name, true)
		resync = append(resync, va.Name)
	}
	return resync, nil
}
