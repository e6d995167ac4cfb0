module github.com/stowage-csi/stowage/resizer

go 1.26.0

replace github.com/stowage-csi/stowage/shared => ../shared
