//go:build tools

// Package tools pins rclone, the FUSE peer s3-fuse is benchmarked against, which the e2e rig builds with
// GOWORK=off (go build github.com/rclone/rclone) into the git-ignored cache. On Linux `rclone mount` is
// pure Go, so it builds with CGO_ENABLED=0 like the other tools.
package tools

import _ "github.com/rclone/rclone"
