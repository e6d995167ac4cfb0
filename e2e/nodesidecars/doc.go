// Package nodesidecars holds the end-to-end tests (build tag e2e) of Stowage's node sidecars,
// csi-node-driver-registrar and livenessprobe, run as their own processes against a CSI driver on a real unix
// socket (package csimock). Their work with a real kubelet is shown on the real nodes (packages node,
// ebschart, s3chart); what is here needs no node.
package nodesidecars
