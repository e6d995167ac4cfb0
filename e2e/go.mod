module github.com/stowage-csi/stowage/e2e

go 1.26

require github.com/stowage-csi/stowage/shared v0.0.0

replace github.com/stowage-csi/stowage/shared => ../shared
