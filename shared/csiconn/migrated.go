package csiconn

import (
	"context"

	"github.com/kubernetes-csi/csi-lib-utils/connection"
)

// WithMigrated marks the calls made with ctx as serving a CSI-migrated in-tree volume, so that
// csi_sidecar_operations_seconds labels them migrated="true" when the connection's metrics manager has the
// migrated label (upstream's attacher and provisioner do the same). Unmarked calls are labelled "false".
func WithMigrated(ctx context.Context, migrated bool) context.Context {
	if !migrated {
		return ctx
	}
	return context.WithValue(ctx, connection.AdditionalInfoKey, connection.AdditionalInfo{Migrated: "true"})
}

// IsMigrated reports whether ctx was marked by WithMigrated.
func IsMigrated(ctx context.Context) bool {
	info, ok := ctx.Value(connection.AdditionalInfoKey).(connection.AdditionalInfo)
	return ok && info.Migrated == "true"
}
