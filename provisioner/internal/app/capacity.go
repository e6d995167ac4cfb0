package app

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/stowage-csi/stowage/provisioner/internal/capacity"
	"github.com/stowage-csi/stowage/shared/csiconn"
	"github.com/stowage-csi/stowage/shared/kubeclient"
)

// newCapacity builds the CSIStorageCapacity controller: its own client (--kube-api-capacity-qps/-burst, so
// capacity updates never queue behind provisioning), the pod's namespace and owner from NAMESPACE and POD_NAME
// as upstream reads them, and a re-run whenever a StorageClass or CSINode changes.
func newCapacity(ctx context.Context, cfg *Config, d leaderDeps, factory informers.SharedInformerFactory) (*capacity.Controller, error) {
	if !d.caps.GetCapacity {
		return nil, errors.New("--enable-capacity needs a driver with the GET_CAPACITY capability")
	}
	ns, pod := os.Getenv("NAMESPACE"), os.Getenv("POD_NAME")
	if ns == "" {
		return nil, errors.New("--enable-capacity needs the NAMESPACE environment variable")
	}
	capCfg := kubeclient.ForCore(d.env.Clients.Config)
	capCfg.QPS, capCfg.Burst = float32(cfg.KubeAPICapacityQPS), cfg.KubeAPICapacityBurst
	kube, err := kubernetes.NewForConfig(capCfg)
	if err != nil {
		return nil, fmt.Errorf("capacity client: %w", err)
	}
	level := cfg.CapacityOwnerrefLevel
	if pod == "" {
		if level >= 0 {
			return nil, errors.New("--enable-capacity with --capacity-ownerref-level >= 0 needs the POD_NAME environment variable")
		}
	}
	owner, err := capacity.Owner(ctx, kube, ns, pod, level)
	if err != nil {
		return nil, err
	}
	var (
		csiNodes    storagelisters.CSINodeLister
		nodes       corelisters.NodeLister
		nodeSegment map[string]string
	)
	if d.nodeName != "" {
		// As upstream: a node's provisioner publishes its own node's segment, as its driver reports it.
		info, err := csiconn.Call(ctx, d.env.Flags.Timeout, csi.NewNodeClient(d.env.CSI.GRPC()).NodeGetInfo, &csi.NodeGetInfoRequest{})
		if err != nil {
			return nil, fmt.Errorf("--enable-capacity with --node-deployment: NodeGetInfo: %w", err)
		}
		if segs := info.GetAccessibleTopology().GetSegments(); len(segs) > 0 {
			nodeSegment = segs
		}
	} else if d.caps.Topology {
		csiNodes, nodes = factory.Storage().V1().CSINodes().Lister(), factory.Core().V1().Nodes().Lister()
	}
	ctrl, err := capacity.New(capacity.Config{
		Driver: d.driver, Namespace: ns, NodeName: d.nodeName, NodeSegment: nodeSegment, Owner: owner,
		PollInterval: cfg.CapacityPollInterval, Timeout: d.env.Flags.Timeout,
		ForImmediateBinding: cfg.CapacityForImmediateBinding, HasTopology: d.caps.Topology,
	}, kube, csi.NewControllerClient(d.env.CSI.GRPC()), factory.Storage().V1().StorageClasses().Lister(),
		csiNodes, nodes, d.env.Metrics.Registerer())
	if err != nil {
		return nil, err
	}
	kick := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { ctrl.Kick() },
		UpdateFunc: func(any, any) { ctrl.Kick() },
		DeleteFunc: func(any) { ctrl.Kick() },
	}
	for _, inf := range []cache.SharedIndexInformer{factory.Storage().V1().StorageClasses().Informer(), factory.Storage().V1().CSINodes().Informer()} {
		if _, err := inf.AddEventHandler(kick); err != nil {
			return nil, err
		}
	}
	return ctrl, nil
}
