// Command livenessprobe is Stowage's drop-in replacement for the Kubernetes livenessprobe sidecar: it serves
// /healthz and answers it with the CSI driver's Probe.
package main

import (
	"os"

	"github.com/stowage-csi/stowage/node-sidecars/internal/command"
	"github.com/stowage-csi/stowage/node-sidecars/internal/liveness"
)

func main() {
	os.Exit(command.New(liveness.Binary, liveness.AddFlags, liveness.Run).Main(os.Args[1:]))
}
