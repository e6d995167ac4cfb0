package metricsparity

import (
	"slices"
	"testing"
)

const upstreamScrape = `# TYPE csi_sidecar_operations_seconds histogram
csi_sidecar_operations_seconds_bucket{driver_name="d",grpc_status_code="OK",method_name="/csi.v1.Identity/Probe",le="0.1"} 1
csi_sidecar_operations_seconds_bucket{driver_name="d",grpc_status_code="OK",method_name="/csi.v1.Identity/Probe",le="600"} 1
csi_sidecar_operations_seconds_bucket{driver_name="d",grpc_status_code="OK",method_name="/csi.v1.Identity/Probe",le="+Inf"} 1
csi_sidecar_operations_seconds_sum{driver_name="d",grpc_status_code="OK",method_name="/csi.v1.Identity/Probe"} 0.01
csi_sidecar_operations_seconds_count{driver_name="d",grpc_status_code="OK",method_name="/csi.v1.Identity/Probe"} 1
# TYPE leader_election_master_status gauge
leader_election_master_status{name=""} 1
# TYPE workqueue_depth gauge
workqueue_depth{name="csi-attacher-va"} 0
`

// Each kind of difference a dashboard would trip on is reported: a missing or extra family, other label
// names, other buckets, other values of a compared label; an allowed extra is not.
func TestCompareReportsEachKindOfDifference(t *testing.T) {
	want, err := Parse(upstreamScrape)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Parse(`# TYPE csi_sidecar_operations_seconds histogram
csi_sidecar_operations_seconds_bucket{driver_name="d",grpc_status_code="OK",method_name="/csi.v1.Identity/Probe",migrated="false",le="0.1"} 1
csi_sidecar_operations_seconds_bucket{driver_name="d",grpc_status_code="OK",method_name="/csi.v1.Identity/Probe",migrated="false",le="1"} 1
csi_sidecar_operations_seconds_bucket{driver_name="d",grpc_status_code="OK",method_name="/csi.v1.Identity/Probe",migrated="false",le="+Inf"} 1
csi_sidecar_operations_seconds_sum{driver_name="d",grpc_status_code="OK",method_name="/csi.v1.Identity/Probe",migrated="false"} 0.01
csi_sidecar_operations_seconds_count{driver_name="d",grpc_status_code="OK",method_name="/csi.v1.Identity/Probe",migrated="false"} 1
# TYPE leader_election_master_status gauge
leader_election_master_status{name="lease"} 1
# TYPE stowage_allowed gauge
stowage_allowed 1
# TYPE stowage_extra gauge
stowage_extra 1
`)
	if err != nil {
		t.Fatal(err)
	}
	diffs := Compare(got, want, Options{
		Extra:  map[string]string{"stowage_allowed": "a deliberate extra"},
		Values: []string{"name"},
	})
	wantDiffs := []string{
		"csi_sidecar_operations_seconds: buckets [0.1 1], upstream [0.1 600]",
		"csi_sidecar_operations_seconds: label names [driver_name,grpc_status_code,method_name,migrated], upstream [driver_name,grpc_status_code,method_name]",
		"extra stowage_extra (GAUGE, labels [])",
		`leader_election_master_status: name values ["lease"], upstream [""] (missing [""], extra ["lease"])`,
		"missing workqueue_depth (GAUGE, labels [name])",
	}
	slices.Sort(diffs)
	if !slices.Equal(diffs, wantDiffs) {
		t.Errorf("diffs:\n%q\nwant:\n%q", diffs, wantDiffs)
	}
	if d := Compare(want, want, Options{}); len(d) != 0 {
		t.Errorf("a scrape differs from itself: %q", d)
	}
}
