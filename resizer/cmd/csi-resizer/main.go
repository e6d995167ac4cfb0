// Command csi-resizer is Stowage's drop-in replacement for the external-resizer sidecar: it watches
// PersistentVolumeClaims of one CSI driver and calls ControllerExpandVolume and ControllerModifyVolume.
package main

import (
	"os"

	"github.com/stowage-csi/stowage/resizer/internal/app"
	"github.com/stowage-csi/stowage/shared/sidecar"
)

func main() {
	var cfg app.Config
	sidecar.Main(cfg.Options(os.Args[1:]), cfg.Run)
}
