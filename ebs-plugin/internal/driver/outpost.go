package driver

import (
	"fmt"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Topology keys of a node on an AWS Outpost (upstream's), published beside the zone keys. CreateVolume builds
// the Outpost's ARN from them, so a volume for such a node is created on its Outpost.
const (
	OutpostIDTopologyKey = "topology.ebs.csi.aws.com/outpost-id"
	RegionTopologyKey    = "topology.ebs.csi.aws.com/region"
	PartitionTopologyKey = "topology.ebs.csi.aws.com/partition"
	AccountIDTopologyKey = "topology.ebs.csi.aws.com/account-id"
)

// outpostARN returns the ARN of the Outpost named by the first preferred, then the first requisite topology
// with an outpost-id, as upstream; "" when none names one. A topology with an outpost-id but without the
// other three keys is InvalidArgument naming the key: upstream then creates the volume in the Region, where
// the Outpost's nodes cannot attach it.
func outpostARN(tr *csi.TopologyRequirement) (string, error) {
	for _, list := range [][]*csi.Topology{tr.GetPreferred(), tr.GetRequisite()} {
		for _, t := range list {
			seg := t.GetSegments()
			id, ok := seg[OutpostIDTopologyKey]
			if !ok {
				continue
			}
			for _, k := range []string{PartitionTopologyKey, RegionTopologyKey, AccountIDTopologyKey, OutpostIDTopologyKey} {
				if seg[k] == "" {
					return "", status.Errorf(codes.InvalidArgument, "accessibility_requirements: a topology with %s needs %s", OutpostIDTopologyKey, k)
				}
				// The ARN's fields are separated by ':', so one inside a field would name another Outpost.
				if k != OutpostIDTopologyKey && strings.Contains(seg[k], ":") {
					return "", status.Errorf(codes.InvalidArgument, "accessibility_requirements: %s=%q holds a ':'", k, seg[k])
				}
			}
			return fmt.Sprintf("arn:%s:outposts:%s:%s:outpost/%s", seg[PartitionTopologyKey], seg[RegionTopologyKey], seg[AccountIDTopologyKey], id), nil
		}
	}
	return "", nil
}

// outpostSegments are the topology segments of an Outpost ARN "arn:<partition>:outposts:<region>:<account>:
// outpost/<id>"; nil for "" or anything else.
func outpostSegments(arn string) map[string]string {
	f := strings.SplitN(arn, ":", 6)
	if len(f) != 6 || f[0] != "arn" || f[2] != "outposts" {
		return nil
	}
	id, ok := strings.CutPrefix(f[5], "outpost/")
	if !ok || id == "" || f[1] == "" || f[3] == "" || f[4] == "" {
		return nil
	}
	return map[string]string{PartitionTopologyKey: f[1], RegionTopologyKey: f[3], AccountIDTopologyKey: f[4], OutpostIDTopologyKey: id}
}
