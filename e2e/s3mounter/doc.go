// Package s3mounter holds the end-to-end tests (build tag e2e) of s3-mounter, the Mountpoint Pod's entry
// point: the test plays the node plugin (opens /dev/fuse, mounts it, sends the fd and the options over the
// comm directory's socket), s3-mounter runs unprivileged with s3-fuse installed as its mount-s3, and
// versitygw is the bucket.
package s3mounter
