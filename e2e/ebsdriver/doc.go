// Package ebsdriver proves the ebs-plugin binary on real parts, against the EC2 emulator (real mkfs and
// mounts on loop devices where a test stages volumes): csi-sanity in all mode with its skipped specs pinned,
// raw block volumes, XFS with expansion and snapshot restore, volume health, account quotas, an unpublish
// cancelling a stuck publish, throttling and metrics, node mode without AWS credentials, and a benchmark of
// EC2 requests per volume lifecycle. The tests carry the e2e and bench build tags; fixtures_e2e_test.go
// holds the volume setup they share.
package ebsdriver
