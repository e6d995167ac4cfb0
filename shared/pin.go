//go:build pin

package shared

import (
	_ "github.com/container-storage-interface/spec/lib/go/csi"
	_ "github.com/kubernetes-csi/csi-lib-utils/connection"
	_ "github.com/kubernetes-csi/csi-lib-utils/rpc"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "google.golang.org/grpc"
	_ "k8s.io/client-go/kubernetes"
	_ "k8s.io/component-base/logs"
	_ "k8s.io/component-base/featuregate"
	_ "k8s.io/klog/v2"
	_ "go.uber.org/automaxprocs/maxprocs"
)
