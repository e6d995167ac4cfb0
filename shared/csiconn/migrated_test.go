package csiconn

import (
	"context"
	"testing"
)

func TestWithMigrated(t *testing.T) {
	for _, migrated := range []bool{false, true} {
		if got := IsMigrated(WithMigrated(context.Background(), migrated)); got != migrated {
			t.Errorf("IsMigrated(WithMigrated(ctx, %v)) = %v", migrated, got)
		}
	}
}
