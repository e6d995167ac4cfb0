// Package s3node tests the S3 CSI node plugin (s3-node) on real parts: the built binary against a real
// control plane, a real FUSE mount of /dev/fuse handed over a unix socket to the real s3-fuse, and a real
// S3 server (versitygw). The test plays the Mountpoint Pod itself (its objects are created by hand and its
// process is a goroutine that receives the mount and runs s3-fuse), so no controller or kubelet is needed.
// Run as root: go test -tags e2e -run TestE2ES3Node ./s3node/.
package s3node
