package sidecar

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/stowage-csi/stowage/shared/metrics"
)

// The migrated label is upstream's only for a driver that replaces an in-tree plugin, in the sidecars that
// serve migrated volumes; every other driver and sidecar has driver_name, method_name and grpc_status_code.
func TestCallMetricsMigratedLabelOnlyForMigratedDrivers(t *testing.T) {
	base := []string{"driver_name", "grpc_status_code", "method_name"}
	for _, tt := range []struct {
		name      string
		driver    string
		migration bool
		want      []string
	}{
		{"migrated driver, migrating sidecar", "ebs.csi.aws.com", true, append(slices.Clone(base), "migrated")},
		{"other driver, migrating sidecar", "hostpath.csi.k8s.io", true, base},
		{"migrated driver, sidecar without migration", "ebs.csi.aws.com", false, base},
	} {
		t.Run(tt.name, func(t *testing.T) {
			reg := metrics.NewRegistry()
			c := newCallMetrics(reg, tt.migration)
			c.RecordMetrics("/csi.v1.Identity/Probe", nil, time.Millisecond)
			c.driverKnown(tt.driver)
			c.RecordMetrics("/csi.v1.Controller/ControllerPublishVolume", errors.New("not gRPC"), time.Second)

			mfs, err := reg.Gatherer().Gather()
			if err != nil {
				t.Fatal(err)
			}
			var series int
			for _, mf := range mfs {
				if mf.GetName() != "csi_sidecar_operations_seconds" {
					continue
				}
				for _, m := range mf.GetMetric() {
					var names []string
					labels := map[string]string{}
					for _, l := range m.GetLabel() {
						names = append(names, l.GetName())
						labels[l.GetName()] = l.GetValue()
					}
					slices.Sort(names)
					if !slices.Equal(names, tt.want) {
						t.Errorf("labels %v, want %v", names, tt.want)
					}
					if labels["method_name"] == "/csi.v1.Controller/ControllerPublishVolume" && labels["driver_name"] != tt.driver {
						t.Errorf("driver_name %q after the driver is known, want %q", labels["driver_name"], tt.driver)
					}
					series++
				}
			}
			if series == 0 {
				t.Fatal("csi_sidecar_operations_seconds not served")
			}
		})
	}
}
