package ec2sim

import (
	"crypto/sha256"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"
)

type xInstanceState struct {
	Code int    `xml:"code"`
	Name string `xml:"name"`
}

type xPlacement struct {
	AvailabilityZone   string `xml:"availabilityZone"`
	AvailabilityZoneID string `xml:"availabilityZoneId"`
	Tenancy            string `xml:"tenancy"`
}

type xEbsInstanceBlockDevice struct {
	VolumeID            string `xml:"volumeId"`
	Status              string `xml:"status"`
	AttachTime          string `xml:"attachTime"`
	DeleteOnTermination bool   `xml:"deleteOnTermination"`
	EbsCardIndex        *int64 `xml:"ebsCardIndex,omitempty"`
}

type xBlockDeviceMapping struct {
	DeviceName string                  `xml:"deviceName"`
	Ebs        xEbsInstanceBlockDevice `xml:"ebs"`
}

type xNetworkInterface struct {
	NetworkInterfaceID string `xml:"networkInterfaceId"`
	MacAddress         string `xml:"macAddress"`
	PrivateIPAddress   string `xml:"privateIpAddress"`
	Status             string `xml:"status"`
}

type xInstance struct {
	InstanceID         string                `xml:"instanceId"`
	ImageID            string                `xml:"imageId"`
	State              xInstanceState        `xml:"instanceState"`
	PrivateDNSName     string                `xml:"privateDnsName"`
	InstanceType       string                `xml:"instanceType"`
	LaunchTime         string                `xml:"launchTime"`
	Placement          xPlacement            `xml:"placement"`
	PrivateIPAddress   string                `xml:"privateIpAddress"`
	Architecture       string                `xml:"architecture"`
	RootDeviceType     string                `xml:"rootDeviceType"`
	RootDeviceName     string                `xml:"rootDeviceName"`
	BlockDeviceMapping []xBlockDeviceMapping `xml:"blockDeviceMapping>item"`
	VirtualizationType string                `xml:"virtualizationType"`
	Hypervisor         string                `xml:"hypervisor"`
	NetworkInterfaces  []xNetworkInterface   `xml:"networkInterfaceSet>item"`
	EbsOptimized       bool                  `xml:"ebsOptimized"`
}

type xReservation struct {
	ReservationID string      `xml:"reservationId"`
	OwnerID       string      `xml:"ownerId"`
	Instances     []xInstance `xml:"instancesSet>item"`
}

type describeInstancesResponse struct {
	Reservations []xReservation `xml:"reservationSet>item"`
	NextToken    string         `xml:"nextToken,omitempty"`
}

// instanceFacts are the made-up but stable network facts of a simulated instance.
type instanceFacts struct {
	mac, ip, eni, dns string
}

func facts(id string) instanceFacts {
	h := sha256.Sum256([]byte(id))
	ip := fmt.Sprintf("10.%d.%d.%d", h[0], h[1], max(h[2], 1))
	return instanceFacts{
		mac: fmt.Sprintf("0e:%02x:%02x:%02x:%02x:%02x", h[3], h[4], h[5], h[6], h[7]),
		ip:  ip,
		eni: fmt.Sprintf("eni-%x", h[8:17])[:21],
		dns: "ip-" + strings.ReplaceAll(ip, ".", "-") + ".ec2.internal",
	}
}

// startTime is a fixed launch time, so answers are stable across restarts.
var launchTime = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func (s *Server) instanceXML(in Instance) xInstance {
	fx := facts(in.ID)
	it := instanceTypes[in.Type]
	x := xInstance{
		InstanceID:         in.ID,
		ImageID:            "ami-0123456789abcdef0",
		State:              xInstanceState{Code: 16, Name: "running"},
		PrivateDNSName:     fx.dns,
		InstanceType:       in.Type,
		LaunchTime:         ts(launchTime),
		Placement:          xPlacement{AvailabilityZone: in.Zone, AvailabilityZoneID: s.zoneID(in.Zone), Tenancy: "default"},
		PrivateIPAddress:   fx.ip,
		Architecture:       "x86_64",
		RootDeviceType:     "ebs",
		RootDeviceName:     rootDevice,
		VirtualizationType: "hvm",
		Hypervisor:         it.hypervisor,
		EbsOptimized:       true,
		NetworkInterfaces:  []xNetworkInterface{{NetworkInterfaceID: fx.eni, MacAddress: fx.mac, PrivateIPAddress: fx.ip, Status: "in-use"}},
	}
	atts := s.attachmentsOf(in.ID)
	sort.Slice(atts, func(i, j int) bool { return atts[i].Device < atts[j].Device })
	for _, a := range atts {
		x.BlockDeviceMapping = append(x.BlockDeviceMapping, xBlockDeviceMapping{
			DeviceName: a.Device,
			Ebs: xEbsInstanceBlockDevice{VolumeID: a.VolumeID, Status: a.Status, AttachTime: a.AttachTime,
				DeleteOnTermination: a.DeleteOnTermination, EbsCardIndex: a.EbsCardIndex},
		})
	}
	return x
}

func (s *Server) describeInstances(r *request) (any, *apiError) {
	page, next, aerr := selection{
		param: "InstanceId",
		check: func(ids []string) *apiError {
			for _, id := range ids {
				if !strings.HasPrefix(id, "i-") || len(id) < 3 {
					return newError(http.StatusBadRequest, "InvalidInstanceID.Malformed", "Invalid id: \"%s\"", id)
				}
			}
			return nil
		},
		exists: func(id string) bool {
			_, ok := s.instances[id]
			return ok
		},
		notFound: errInstanceNotFound,
		all:      func() []string { return mapKeys(s.instances) },
		values: func(id, name string) ([]string, bool) {
			in := s.instances[id]
			switch name {
			case "instance-id":
				return []string{in.ID}, true
			case "availability-zone":
				return []string{in.Zone}, true
			case "instance-type":
				return []string{in.Type}, true
			case "instance-state-name":
				return []string{"running"}, true
			case "block-device-mapping.volume-id":
				var out []string
				for _, a := range s.attachmentsOf(in.ID) {
					out = append(out, a.VolumeID)
				}
				return out, true
			}
			return nil, false
		},
	}.page(r, 5, 1000)
	if aerr != nil {
		return nil, aerr
	}
	out := &describeInstancesResponse{NextToken: next}
	for _, id := range page {
		// One reservation per instance, as when each was launched on its own.
		out.Reservations = append(out.Reservations, xReservation{
			ReservationID: "r-" + strings.TrimPrefix(id, "i-"),
			OwnerID:       s.cfg.AccountID,
			Instances:     []xInstance{s.instanceXML(s.instances[id])},
		})
	}
	return out, nil
}

type xEbsInfo struct {
	EbsOptimizedSupport string `xml:"ebsOptimizedSupport"`
	EncryptionSupport   string `xml:"encryptionSupport"`
	NvmeSupport         string `xml:"nvmeSupport"`
	MaxAttachments      int64  `xml:"maximumEbsAttachments"`
	AttachmentLimitType string `xml:"attachmentLimitType"`
	MaxCards            int64  `xml:"maximumEbsCards,omitempty"`
}

type xVCpuInfo struct {
	DefaultVCpus int64 `xml:"defaultVCpus"`
}

type xMemoryInfo struct {
	SizeInMiB int64 `xml:"sizeInMiB"`
}

type xInstanceTypeInfo struct {
	InstanceType      string      `xml:"instanceType"`
	CurrentGeneration bool        `xml:"currentGeneration"`
	Hypervisor        string      `xml:"hypervisor"`
	VCpuInfo          xVCpuInfo   `xml:"vCpuInfo"`
	MemoryInfo        xMemoryInfo `xml:"memoryInfo"`
	EbsInfo           xEbsInfo    `xml:"ebsInfo"`
}

type describeInstanceTypesResponse struct {
	InstanceTypes []xInstanceTypeInfo `xml:"instanceTypeSet>item"`
	NextToken     string              `xml:"nextToken,omitempty"`
}

func (s *Server) describeInstanceTypes(r *request) (any, *apiError) {
	names := r.form.list("InstanceType")
	for _, n := range names {
		if _, ok := instanceTypes[n]; !ok {
			return nil, errInvalidValue("The following supplied instance types do not exist: [%s]", n)
		}
	}
	filters, aerr := r.form.filters()
	if aerr != nil {
		return nil, aerr
	}
	if len(names) == 0 {
		names = mapKeys(instanceTypes)
	}
	// Named types are taken as given, repeats included.
	selected, aerr := matching(names, filters, func(n, name string) ([]string, bool) {
		switch name {
		case "instance-type":
			return []string{n}, true
		case "hypervisor":
			return []string{instanceTypes[n].hypervisor}, true
		}
		return nil, false
	})
	if aerr != nil {
		return nil, aerr
	}
	page, next, aerr := r.page(selected, 5, 100, false)
	if aerr != nil {
		return nil, aerr
	}
	out := &describeInstanceTypesResponse{NextToken: next}
	for _, n := range page {
		it := instanceTypes[n]
		nvme := "required"
		if it.hypervisor != "nitro" {
			nvme = "unsupported"
		}
		out.InstanceTypes = append(out.InstanceTypes, xInstanceTypeInfo{
			InstanceType: n, CurrentGeneration: it.hypervisor == "nitro", Hypervisor: it.hypervisor,
			VCpuInfo: xVCpuInfo{DefaultVCpus: it.vcpus}, MemoryInfo: xMemoryInfo{SizeInMiB: it.memMiB},
			EbsInfo: xEbsInfo{EbsOptimizedSupport: "default", EncryptionSupport: "supported", NvmeSupport: nvme,
				MaxAttachments: it.maxAttachments, AttachmentLimitType: it.limitType, MaxCards: it.maxCards},
		})
	}
	return out, nil
}
