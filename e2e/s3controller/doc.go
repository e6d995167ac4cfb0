// Package s3controller holds the end-to-end tests (build tag e2e) of Stowage's s3-controller: the real
// binary, configured through the environment exactly as upstream's chart configures aws-s3-csi-controller,
// as its own process under the ServiceAccount and RBAC of deploy/rbac/s3-controller.yaml, against a real
// control plane (package cluster, whose kube-controller-manager binds the claims) with the CRD of
// deploy/crds and the namespace and priority class of deploy/s3. There is no kubelet: the test writes the
// workload and Mountpoint Pods' phases through the status subresource as kubelet would.
package s3controller
