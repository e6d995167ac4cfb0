module github.com/stowage-csi/stowage/e2e/deploycheck

go 1.26.0
