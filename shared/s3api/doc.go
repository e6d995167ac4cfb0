// Package s3api holds the API shared by the S3 CSI driver's binaries: the cluster-scoped
// MountpointS3PodAttachment custom resource (s3.csi.aws.com/v2, short name s3pa) with upstream's exact
// JSON layout, and the names (driver, labels, annotations, namespace) the controller, the node plugin and
// the Mountpoint Pods agree on. The s3-controller is the only writer of attachments; s3-node only reads them.
package s3api
