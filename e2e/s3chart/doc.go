// Package s3chart tests the stowage-s3 chart as users install it: `helm install` on real nodes (package
// node), every container from Stowage's images assembled here, versitygw as S3 on the Pod network's gateway.
package s3chart
