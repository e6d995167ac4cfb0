// Package provisioner holds the end-to-end tests (build tag e2e) and the provision-storm benchmark (build tag
// bench) of csi-provisioner: the binary built from ../provisioner runs as its own process under the
// ServiceAccount and RBAC of deploy/rbac/csi-provisioner.yaml, against a real control plane (e2e/sidecarrig) and
// the mock CSI driver (e2e/csimock). TestE2EProvisioner counts the provisioner's writes to claims and PVs in
// kube-apiserver's audit log, up to the writes for a sentinel claim it provisions after the one under test.
package provisioner
