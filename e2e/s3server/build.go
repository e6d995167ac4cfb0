// Package s3server runs a real S3 server for tests and benchmarks: versitygw (Apache-2.0), built from
// the Go module proxy into the repository's git-ignored cache and started on loopback with its posix
// backend in a temporary directory and a generated access key.
package s3server

import (
	"context"
	"strings"

	"github.com/stowage-csi/stowage/e2e/tools"
)

// Binary returns the path of the versitygw binary, building it first if the cache lacks it.
func Binary(ctx context.Context) (string, error) {
	return tools.Binary(ctx, tools.Versitygw(), "versitygw")
}

// cleanEnv drops AWS_* settings (AWS_CA_BUNDLE, profiles) from env so they cannot leak into a child.
func cleanEnv(env []string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, "AWS_") {
			out = append(out, kv)
		}
	}
	return out
}
