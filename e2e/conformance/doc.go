// Package conformance runs Kubernetes' External Storage suite (e2e.test, test/e2e/storage/external) against
// Stowage's EBS stack installed by its chart on real nodes (package ebsinstall), with the project's own test
// driver file for ebs.csi.aws.com in testdata, and judges the JUnit report it writes: any failure fails the
// run, and so does any skip that is neither the framework's own (a capability the driver does not claim, too
// few nodes or zones) nor listed in testdata/skips.yaml with the reason it cannot run here.
package conformance
