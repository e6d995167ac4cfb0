// Package ebschart tests the stowage-ebs chart as users install it: `helm install` on real nodes (package
// node) as package ebsinstall does it, every container from Stowage's images assembled here, ec2sim as EC2
// and as each node's IMDS.
package ebschart
