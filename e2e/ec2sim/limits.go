package ec2sim

import "net/http"

// volumeLimits are EBS's per-type limits: sizes in GiB, IOPS, IOPS per GiB, throughput in MiB/s.
type volumeLimits struct {
	minSize, maxSize int64
	minIops, maxIops int64
	iopsPerGiB       int64 // 0: IOPS are not provisioned for this type
	baseIops         int64 // IOPS always allowed whatever the size (gp3's baseline)
	defaultIops      int64
	minTput, maxTput int64 // 0: throughput is not provisioned for this type
	defaultTput      int64
	multiAttach      bool
	reportsIops      bool
}

// volumeTypes is EBS's limits per volume type, as of 2026-11, from the EBS User Guide's "Amazon EBS volume
// types" tables (docs.aws.amazon.com/ebs/latest/userguide/ebs-volume-types.html). gp3 follows the September
// 2025 raise ("Amazon EBS gp3 volumes now support up to 64 TiB, 80,000 IOPS and 2,000 MiB/s", AWS What's
// New, 2025-09-26): up to 64 TiB, 80,000 IOPS (500 per GiB above the 3,000 baseline) and 2,000 MiB/s (0.25 MiB/s
// per IOPS above the 125 MiB/s baseline). io2 is Block Express (64 TiB, 256,000 IOPS, 1,000 per GiB); io1
// 16 TiB, 64,000 IOPS, 50 per GiB. Drivers learn the IOPS maximum from EC2's error text (see resolve), so
// changing a number here is all it takes for them to follow.
var volumeTypes = map[string]volumeLimits{
	"gp2":      {minSize: 1, maxSize: 16384, reportsIops: true},
	"gp3":      {minSize: 1, maxSize: 65536, minIops: 3000, maxIops: 80000, iopsPerGiB: 500, baseIops: 3000, defaultIops: 3000, minTput: 125, maxTput: 2000, defaultTput: 125, reportsIops: true},
	"io1":      {minSize: 4, maxSize: 16384, minIops: 100, maxIops: 64000, iopsPerGiB: 50, multiAttach: true, reportsIops: true},
	"io2":      {minSize: 4, maxSize: 65536, minIops: 100, maxIops: 256000, iopsPerGiB: 1000, multiAttach: true, reportsIops: true},
	"st1":      {minSize: 125, maxSize: 16384},
	"sc1":      {minSize: 125, maxSize: 16384},
	"standard": {minSize: 1, maxSize: 1024},
}

const validVolumeTypes = "standard, io1, io2, gp2, sc1, st1, gp3"

// volumeSpec is the requested configuration of a volume, before defaults.
type volumeSpec struct {
	Type             string
	Size             int64
	Iops, Throughput int64
	IopsSet, TputSet bool
	MultiAttach      bool
}

// resolve validates a spec against EBS's limits with EBS's error texts and fills in the type's defaults.
// The order matters: an absurd IOPS value must report "maximum is N" before any ratio check, because
// drivers learn the maximum from that message.
func (sp volumeSpec) resolve() (iops, tput int64, aerr *apiError) {
	lim, ok := volumeTypes[sp.Type]
	if !ok {
		return 0, 0, errInvalidValue("Value (%s) for parameter volumeType is invalid. Valid values: %s", sp.Type, validVolumeTypes)
	}
	if sp.Size < lim.minSize {
		return 0, 0, errInvalidValue("Volume of %dGiB is too small for volume type %s; minimum is %dGiB.", sp.Size, sp.Type, lim.minSize)
	}
	if sp.Size > lim.maxSize {
		return 0, 0, errInvalidValue("Volume of %dGiB is too large for volume type %s; maximum is %dGiB.", sp.Size, sp.Type, lim.maxSize)
	}
	if sp.MultiAttach && !lim.multiAttach {
		return 0, 0, errCombination("The parameter multiAttachEnabled is not supported for %s volumes.", sp.Type)
	}
	switch {
	case lim.iopsPerGiB == 0 && sp.IopsSet:
		return 0, 0, errCombination("The parameter iops is not supported for %s volumes.", sp.Type)
	case lim.iopsPerGiB == 0 && sp.Type == "gp2":
		// gp2 reports its burst baseline: 3 IOPS per GiB, at least 100, at most 16000.
		iops = max(100, min(16000, 3*sp.Size))
	case lim.iopsPerGiB == 0:
	case !sp.IopsSet && lim.defaultIops == 0:
		return 0, 0, errMissing("iops")
	default:
		iops = lim.defaultIops
		if sp.IopsSet {
			iops = sp.Iops
		}
		if iops > lim.maxIops {
			return 0, 0, errInvalidValue("Volume iops of %d is too high; maximum is %d.", iops, lim.maxIops)
		}
		if iops < lim.minIops {
			return 0, 0, errInvalidValue("Volume iops of %d is too low; minimum is %d.", iops, lim.minIops)
		}
		if iops > lim.baseIops && iops > sp.Size*lim.iopsPerGiB {
			return 0, 0, errInvalidValue("Iops to volume size ratio of %f is too high; maximum is %f.", float64(iops)/float64(sp.Size), float64(lim.iopsPerGiB))
		}
	}
	switch {
	case lim.maxTput == 0 && sp.TputSet:
		return 0, 0, errCombination("The parameter throughput is not supported for %s volumes.", sp.Type)
	case lim.maxTput == 0:
	default:
		tput = lim.defaultTput
		if sp.TputSet {
			tput = sp.Throughput
		}
		if tput > lim.maxTput {
			return 0, 0, errInvalidValue("Volume throughput of %d is too high; maximum is %d.", tput, lim.maxTput)
		}
		if tput < lim.minTput {
			return 0, 0, errInvalidValue("Volume throughput of %d is too low; minimum is %d.", tput, lim.minTput)
		}
		if tput > lim.defaultTput && float64(tput) > float64(iops)/4 {
			return 0, 0, errInvalidValue("Throughput (MiBps) to iops ratio of %f is too high; maximum is 0.250000 MiBps per iops.", float64(tput)/float64(iops))
		}
	}
	return iops, tput, nil
}

func reportsIops(typ string) bool { return volumeTypes[typ].reportsIops }

func reportsThroughput(typ string) bool { return volumeTypes[typ].maxTput > 0 }

// instanceType is what DescribeInstanceTypes tells about an instance type's EBS attachments.
type instanceType struct {
	maxAttachments int64
	limitType      string // "shared" (volumes, ENIs and the root share the slots) or "dedicated"
	maxCards       int64  // >0 for instances with several EBS cards
	hypervisor     string
	vcpus, memMiB  int64
}

var instanceTypes = map[string]instanceType{
	"t3.medium":     {maxAttachments: 28, limitType: "shared", hypervisor: "nitro", vcpus: 2, memMiB: 4096},
	"m5.large":      {maxAttachments: 28, limitType: "shared", hypervisor: "nitro", vcpus: 2, memMiB: 8192},
	"m5.xlarge":     {maxAttachments: 28, limitType: "shared", hypervisor: "nitro", vcpus: 4, memMiB: 16384},
	"c5.large":      {maxAttachments: 28, limitType: "shared", hypervisor: "nitro", vcpus: 2, memMiB: 4096},
	"r5.large":      {maxAttachments: 28, limitType: "shared", hypervisor: "nitro", vcpus: 2, memMiB: 16384},
	"m7i.large":     {maxAttachments: 32, limitType: "dedicated", hypervisor: "nitro", vcpus: 2, memMiB: 8192},
	"m8g.large":     {maxAttachments: 32, limitType: "dedicated", hypervisor: "nitro", vcpus: 2, memMiB: 8192},
	"r8gb.48xlarge": {maxAttachments: 128, limitType: "dedicated", maxCards: 2, hypervisor: "nitro", vcpus: 192, memMiB: 1572864},
	"m4.large":      {maxAttachments: 39, limitType: "dedicated", hypervisor: "xen", vcpus: 2, memMiB: 8192},
	"t2.micro":      {maxAttachments: 39, limitType: "dedicated", hypervisor: "xen", vcpus: 1, memMiB: 1024},
}

// volumeSlots is how many data volumes fit: the root volume takes a slot, and on shared-limit instances so
// does the one network interface every simulated instance has.
func (it instanceType) volumeSlots() int64 {
	n := it.maxAttachments - 1
	if it.limitType == "shared" {
		n--
	}
	return n
}

func errAttachmentLimit(instanceID string) *apiError {
	return newError(http.StatusBadRequest, "AttachmentLimitExceeded", "You have reached the maximum number of attachments for instance %s.", instanceID)
}
