// Command csi-node-driver-registrar is Stowage's drop-in replacement for the Kubernetes node-driver-registrar
// sidecar: it registers a CSI driver's node socket with the kubelet through the plugin registration socket.
package main

import (
	"os"

	"github.com/stowage-csi/stowage/node-sidecars/internal/command"
	"github.com/stowage-csi/stowage/node-sidecars/internal/registrar"
)

func main() {
	os.Exit(command.New(registrar.Binary, registrar.AddFlags, registrar.Run).Main(os.Args[1:]))
}
