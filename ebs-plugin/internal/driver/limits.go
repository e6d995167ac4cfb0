package driver

import "strings"

const (
	// xenAttachmentLimit is AWS's recommended maximum for instances built before Nitro; it is not shared.
	xenAttachmentLimit = 39
	// nitroSharedLimit is the Nitro attachment limit (28) less the primary network interface, which every
	// instance has; EBS volumes and further interfaces share it.
	nitroSharedLimit = 27
)

// xenFamilies are the instance families built on the Xen hypervisor.
var xenFamilies = map[string]bool{
	"c1": true, "c3": true, "c4": true, "cc2": true, "cr1": true, "d2": true, "g2": true, "g3": true, "g3s": true,
	"h1": true, "hs1": true, "i2": true, "i3": true, "m1": true, "m2": true, "m3": true, "m4": true, "p2": true,
	"p3": true, "r3": true, "r4": true, "t1": true, "t2": true, "x1": true, "x1e": true,
}

// attachmentLimit returns the instance type's EBS attachment limit and whether network interfaces share it.
// Instance types with dedicated EBS limits larger than the shared one are reported with the shared limit:
// under-counting leaves slots unused, over-counting hangs attaches.
func attachmentLimit(instanceType string) (int64, bool) {
	family, size, _ := strings.Cut(instanceType, ".")
	if xenFamilies[family] && !strings.HasPrefix(size, "metal") {
		return xenAttachmentLimit, false
	}
	return nitroSharedLimit, true
}
