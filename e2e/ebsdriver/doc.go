// Package ebsdriver proves the ebs-plugin binary on real parts: csi-sanity against the plugin in all mode
// talking to the EC2 emulator (with real mkfs and mounts on loop devices), node mode without AWS
// credentials, and a benchmark of EC2 requests per volume lifecycle. The tests carry the e2e and bench
// build tags; this file only names the package.
package ebsdriver
