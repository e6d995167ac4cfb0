package driver

import (
	"maps"
	"strconv"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stowage-csi/stowage/shared/testutil"
)

// FuzzTopology reads CreateVolume's accessibility requirements, which come from StorageClass allowedTopologies
// and node labels: no panic; a refusal is InvalidArgument naming the key; an Outpost ARN built from a segment
// reads back (outpostSegments, what the volume's topology is published from) as that segment's four keys, so
// the volume lands on the Outpost the requirement names; every zone a requirement names is in topologyZones.
func FuzzTopology(f *testing.F) {
	outpost := "topology.ebs.csi.aws.com/outpost-id=op-0123\ntopology.ebs.csi.aws.com/region=us-east-1\n" +
		"topology.ebs.csi.aws.com/partition=aws\ntopology.ebs.csi.aws.com/account-id=123456789012\n"
	f.Add("topology.ebs.csi.aws.com/zone=us-east-1a", "topology.kubernetes.io/zone=us-east-1b")
	f.Add(outpost+"topology.kubernetes.io/zone=us-east-1a", "")
	f.Add("topology.ebs.csi.aws.com/outpost-id=op-1", outpost)
	f.Add(strings.Replace(outpost, "us-east-1", "us:east", 1), "")
	f.Add(strings.Replace(outpost, "op-0123", "op/1:x", 1), "")
	f.Add("", "topology.k8s.aws/zone-id=use1-az1")
	f.Fuzz(func(t *testing.T, preferred, requisite string) {
		tr := &csi.TopologyRequirement{
			Preferred: []*csi.Topology{{Segments: testutil.FuzzMap(preferred)}},
			Requisite: []*csi.Topology{{Segments: testutil.FuzzMap(requisite)}},
		}
		for _, list := range [][]*csi.Topology{tr.Preferred, tr.Requisite} {
			for _, k := range []string{ZoneTopologyKey, WellKnownZoneTopologyKey} {
				if z := list[0].Segments[k]; z != "" && !topologyZones(tr)[z] {
					t.Fatalf("topologyZones(%v) lacks %q", tr, z)
				}
			}
		}
		arn, err := outpostARN(tr)
		if err != nil {
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "topology.ebs.csi.aws.com/") {
				t.Fatalf("outpostARN(%v) = %v: want InvalidArgument naming the key", tr, err)
			}
			return
		}
		var seg map[string]string
		for _, list := range [][]*csi.Topology{tr.Preferred, tr.Requisite} {
			if _, ok := list[0].Segments[OutpostIDTopologyKey]; ok && seg == nil {
				seg = list[0].Segments
			}
		}
		if seg == nil {
			if arn != "" {
				t.Fatalf("outpostARN(%v) = %q without an outpost-id", tr, arn)
			}
			return
		}
		want := map[string]string{}
		for _, k := range []string{OutpostIDTopologyKey, RegionTopologyKey, PartitionTopologyKey, AccountIDTopologyKey} {
			want[k] = seg[k]
		}
		if got := outpostSegments(arn); !maps.Equal(got, want) {
			t.Fatalf("outpostARN(%v) = %q, which reads back as %v", tr, arn, got)
		}
	})
}

// FuzzPartition reads upstream's partition volume attribute: no panic; a refusal is InvalidArgument naming the
// attribute; an accepted partition is a number from 1 to 65535 as the kernel writes it, and its device is the
// disk's name with that number (and a "p" after a disk name ending in a digit).
func FuzzPartition(f *testing.F) {
	for _, s := range []string{"1", "0", "00", "01", "65535", "65536", "-1", "+1", " 1", "x"} {
		f.Add(s, "/dev/nvme1n1")
	}
	f.Add("2", "/dev/xvdba")
	f.Fuzz(func(t *testing.T, p, device string) {
		got, err := partitionOf(map[string]string{VolumeContextPartition: p})
		if err != nil {
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), VolumeContextPartition) {
				t.Fatalf("partitionOf(%q) = %v: want InvalidArgument naming the attribute", p, err)
			}
			return
		}
		if got == "" {
			if p != "0" {
				t.Fatalf("partitionOf(%q) = no partition", p)
			}
			return
		}
		if n, err := strconv.Atoi(got); err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != got || got != p {
			t.Fatalf("partitionOf(%q) = %q", p, got)
		}
		if device == "" {
			return
		}
		dev := partitionDevice(device, got)
		if !strings.HasPrefix(dev, device) || !strings.HasSuffix(dev, got) || len(dev) > len(device)+len(got)+1 {
			t.Fatalf("partitionDevice(%q, %q) = %q", device, got, dev)
		}
	})
}

// FuzzIDs checks the EC2 ID syntax every controller call checks before it reaches EC2: an accepted ID is its
// prefix and 1 to 32 letters and digits, so it holds nothing EC2 filters or a log line could misread.
func FuzzIDs(f *testing.F) {
	for _, s := range []string{"vol-0123456789abcdef0", "snap-0a", "i-0123", "vol-", "vol-a b", "vol-ab/../c", "vol-\u00e9", "vol-" + strings.Repeat("a", 33)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		for prefix, valid := range map[string]func(string) bool{"vol-": validVolumeID, "snap-": validSnapshotID, "i-": validInstanceID} {
			if !valid(id) {
				continue
			}
			rest, ok := strings.CutPrefix(id, prefix)
			if !ok || rest == "" || len(rest) > 32 || strings.IndexFunc(rest, func(r rune) bool {
				return !(r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z')
			}) >= 0 {
				t.Fatalf("%q accepted as an ID with prefix %s", id, prefix)
			}
		}
	})
}
