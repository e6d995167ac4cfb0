package metrics

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestRegistryServesCollectors(t *testing.T) {
	r := NewRegistry()
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "stowage_test_gauge", Help: "test"}, []string{"name"})
	if err := r.Registerer().Register(g); err != nil {
		t.Fatal(err)
	}
	g.WithLabelValues("x").Set(3)

	rec := httptest.NewRecorder()
	r.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	body := rec.Body.String()
	for _, want := range []string{
		"go_goroutines", "process_start_time_seconds", `stowage_test_gauge{name="x"} 3`,
		"promhttp_metric_handler_requests_total",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("scrape lacks %q", want)
		}
	}
}

func TestRegistriesAreIndependent(t *testing.T) {
	// Two registries in one process (two leader-election candidates in a test) must not collide.
	for range 2 {
		r := NewRegistry()
		c := prometheus.NewCounter(prometheus.CounterOpts{Name: "stowage_test_total", Help: "test"})
		if err := r.Registerer().Register(c); err != nil {
			t.Fatalf("second registry rejected a metric the first one has: %v", err)
		}
	}
}

// A sidecar's registry serves what component-base's global registry serves upstream: every Go runtime metric
// and the registry's meta metrics; the scrape counter only where asked (upstream's provisioner alone has it).
func TestSidecarRegistryServesUpstreamsGlobalFamilies(t *testing.T) {
	for _, countScrapes := range []bool{false, true} {
		r := NewSidecarRegistry(countScrapes)
		rec := httptest.NewRecorder()
		r.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
		body := rec.Body.String()
		for _, want := range []string{"go_gc_heap_allocs_bytes_total", "go_sched_goroutines_goroutines",
			"go_goroutines", "process_start_time_seconds", "registered_metrics_total"} {
			if !strings.Contains(body, want) {
				t.Errorf("countScrapes=%v: scrape lacks %q", countScrapes, want)
			}
		}
		if got := strings.Contains(body, "promhttp_metric_handler_requests_total"); got != countScrapes {
			t.Errorf("countScrapes=%v: promhttp_metric_handler_requests_total served: %v", countScrapes, got)
		}
	}
}
