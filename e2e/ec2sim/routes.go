package ec2sim

import (
	"encoding/json"
	"net/http"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// routes is the EC2 endpoint's handler. Every route is a method+path pattern with a handler of its own, so a
// debug endpoint cannot fall through into the EC2 Query path: EC2 is POST /, everything else is beside it.
func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /{$}", s.serveEC2)
	// EC2 answers a request to / that is not a form POST with its own error XML, not an HTTP 405.
	mux.HandleFunc("/{$}", serveNotPost)

	mux.Handle("GET /metrics", promhttp.HandlerFor(s.metrics.registry, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /debug/state", getJSON(s.State))

	mux.HandleFunc("GET /debug/faults", getJSON(s.Faults))
	setFaults := setJSON("faults", func(f Faults) error {
		if err := f.validate(); err != nil {
			return err
		}
		s.SetFaults(f)
		return nil
	}, s.Faults)
	mux.HandleFunc("POST /debug/faults", setFaults)
	mux.HandleFunc("PUT /debug/faults", setFaults)

	mux.HandleFunc("GET /debug/quotas", getJSON(s.Quotas))
	setQuotas := setJSON("quotas", func(q Quotas) error { s.SetQuotas(q); return nil }, s.Quotas)
	mux.HandleFunc("POST /debug/quotas", setQuotas)
	mux.HandleFunc("PUT /debug/quotas", setQuotas)
	return mux
}

func serveNotPost(w http.ResponseWriter, _ *http.Request) {
	writeError(w, newRequestID(), newError(http.StatusBadRequest, "InvalidHttpRequest", "EC2 Query requests must be POSTed to /."))
}

// getJSON answers with what get returns, as JSON.
func getJSON[T any](get func() T) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, get())
	}
}

// setJSON decodes a new value of a setting (unknown fields refused, so a typo is not silently ignored),
// applies it with set and answers the setting now in force.
func setJSON[T any](name string, set func(T) error, get func() T) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var v T
		dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&v); err != nil {
			http.Error(w, name+": "+err.Error(), http.StatusBadRequest)
			return
		}
		if err := set(v); err != nil {
			http.Error(w, name+": "+err.Error(), http.StatusBadRequest)
			return
		}
		writeJSON(w, get())
	}
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
