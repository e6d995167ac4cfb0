// Package statefulsetstorm measures what a user waits for when a StatefulSet of many replicas, each with an
// EBS claim, starts and goes away on real nodes: the stowage-ebs chart installed by `helm install` on two real
// nodes in two zones (package ebsinstall), ec2sim as EC2 at EC2's real delays. Its TestBenchStatefulSetStorm
// (behind the bench tag) prints the times, EC2 calls and API writes of Stowage's chart at its defaults, of the
// same chart with upstream's sidecar binaries at upstream's flags, and of Stowage's images at upstream's
// flags, beside the floor EC2's delays set.
package statefulsetstorm
