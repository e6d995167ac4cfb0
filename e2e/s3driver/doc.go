// Package s3driver holds the end-to-end tests of the S3 CSI driver on real parts (e2e/s3stack): sharing of
// Mountpoint Pods, reads and writes through real FUSE mounts against a real S3 server, teardown, errors
// surfaced to the user, and restarts of the driver's processes mid-publish.
package s3driver
