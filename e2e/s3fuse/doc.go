// Package s3fuse holds the end-to-end tests (build tag e2e) and the benchmark (build tag bench) of
// s3-fuse: the binary is built from ../s3-mounter and run as a process against versitygw, with real
// FUSE mounts, the way users and the Mountpoint pod run it.
package s3fuse
