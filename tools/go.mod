module github.com/stowage-csi/stowage/tools

go 1.26.0
