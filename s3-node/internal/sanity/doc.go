// Package sanity runs csi-sanity against s3-node's identity and node services (tests only).
package sanity
