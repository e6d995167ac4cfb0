package ec2sim

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

func TestDescribeAvailabilityZones(t *testing.T) {
	s := startServer(t, nil)
	c := newClient(t, s)
	ctx := ctxT(t)

	out, err := c.DescribeAvailabilityZones(ctx, &ec2.DescribeAvailabilityZonesInput{})
	if err != nil {
		t.Fatalf("DescribeAvailabilityZones: %v", err)
	}
	var names, ids []string
	for _, z := range out.AvailabilityZones {
		names = append(names, aws.ToString(z.ZoneName))
		ids = append(ids, aws.ToString(z.ZoneId))
		if z.State != types.AvailabilityZoneStateAvailable || aws.ToString(z.RegionName) != "us-east-1" {
			t.Errorf("zone %+v", z)
		}
	}
	if want := []string{"us-east-1a", "us-east-1b", "us-east-1c"}; !equalStrings(names, want) {
		t.Errorf("zones %v, want %v", names, want)
	}
	if want := []string{"use1-az1", "use1-az2", "use1-az3"}; !equalStrings(ids, want) {
		t.Errorf("zone IDs %v, want %v", ids, want)
	}

	_, err = c.DescribeAvailabilityZones(ctx, &ec2.DescribeAvailabilityZonesInput{DryRun: aws.Bool(true)})
	wantCode(t, err, "DryRunOperation")

	out, err = c.DescribeAvailabilityZones(ctx, &ec2.DescribeAvailabilityZonesInput{
		Filters: []types.Filter{{Name: aws.String("zone-name"), Values: []string{"*b"}}},
	})
	if err != nil || len(out.AvailabilityZones) != 1 || aws.ToString(out.AvailabilityZones[0].ZoneName) != "us-east-1b" {
		t.Errorf("zone-name filter: %+v, %v", out, err)
	}
	_, err = c.DescribeAvailabilityZones(ctx, &ec2.DescribeAvailabilityZonesInput{ZoneNames: []string{"us-east-1z"}})
	wantCode(t, err, "InvalidParameterValue")
	_, err = c.DescribeAvailabilityZones(ctx, &ec2.DescribeAvailabilityZonesInput{
		Filters: []types.Filter{{Name: aws.String("bogus"), Values: []string{"x"}}},
	})
	wantCode(t, err, "InvalidParameterValue")
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
