// Command csi-attacher is Stowage's drop-in replacement for the external-attacher sidecar: it watches
// VolumeAttachments of one CSI driver and calls ControllerPublishVolume/ControllerUnpublishVolume.
package main

import (
	"os"

	"github.com/stowage-csi/stowage/attacher/internal/app"
	"github.com/stowage-csi/stowage/shared/sidecar"
)

func main() {
	var cfg app.Config
	sidecar.Main(cfg.Options(os.Args[1:]), cfg.Run)
}
