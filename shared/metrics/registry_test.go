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
