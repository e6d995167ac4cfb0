// Command rclone is rclone's own command line (its cmd.Main) with only the parts the s3-fuse benchmarks run:
// `rclone mount` over the S3 backend, and the local backend that the VFS cache keeps its files with. The
// release's main package links every backend and command, over 1,600 packages, which took more than half an
// hour to build on the benchmark's 2 shared cores; this one needs about a third of them.
package main

import (
	_ "github.com/rclone/rclone/backend/local"
	_ "github.com/rclone/rclone/backend/s3"
	"github.com/rclone/rclone/cmd"
	_ "github.com/rclone/rclone/cmd/mount"
)

func main() { cmd.Main() }
