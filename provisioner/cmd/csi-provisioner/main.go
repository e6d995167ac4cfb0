// Command csi-provisioner is Stowage's drop-in replacement for the external-provisioner sidecar.
package main

import (
	"context"
	"os"

	"github.com/stowage-csi/stowage/provisioner/internal/app"
	"github.com/stowage-csi/stowage/shared/sidecar"
)

func main() {
	var cfg app.Config
	sidecar.Main(cfg.Options(os.Args[1:]), func(ctx context.Context, env *sidecar.Env) error {
		return app.Run(ctx, env, &cfg)
	})
}
