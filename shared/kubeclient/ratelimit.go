package kubeclient

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
)

// Where a client's rate limit came from.
const (
	// RateFromFlags: --kube-api-qps or --kube-api-burst was given; honoured exactly.
	RateFromFlags = "flags"
	// RateServerFairness: the API server answered with API Priority and Fairness headers, so it protects
	// itself and the client runs without a token bucket; concurrency stays bounded by the worker count.
	RateServerFairness = "apf"
	// RateFallback: the server did not show APF (or could not be asked); the fixed defaults apply.
	RateFallback = "fallback"
)

// The response headers API Priority and Fairness puts on every request it classified.
var apfHeaders = []string{"X-Kubernetes-Pf-Flowschema-Uid", "X-Kubernetes-Pf-Prioritylevel-Uid"}

// probeTimeout bounds the start-up request that looks for APF.
const probeTimeout = 10 * time.Second

// RateLimit is the client-side limit a process runs with.
type RateLimit struct {
	// QPS is negative when there is no client-side limiter.
	QPS   float32
	Burst int
	// Source is RateFromFlags, RateServerFairness or RateFallback.
	Source string
}

// Unlimited reports whether requests go out without a client-side token bucket.
func (r RateLimit) Unlimited() bool { return r.QPS < 0 }

// chooseRate decides the client's limit. Values given on the command line are kept exactly (users count on
// that: cert-manager/cert-manager#9158). Otherwise, SIG API Machinery's advice and controller-runtime's default
// since 2025: when the server has API Priority and Fairness, no client-side limiter, because APF queues and
// rejects (429 with Retry-After, which client-go honours) fairly across clients while a token bucket only idles
// a sidecar below what the server takes; without APF the fixed fallback applies.
func chooseRate(ctx context.Context, cfg *rest.Config, o Options) RateLimit {
	fallback := RateLimit{QPS: o.QPS, Burst: o.Burst, Source: RateFallback}
	if !o.AdaptiveRate {
		fallback.Source = RateFromFlags
		return fallback
	}
	has, err := serverHasFairness(ctx, cfg)
	if err != nil {
		klog.FromContext(ctx).Info("Could not ask the API server about API Priority and Fairness; using the fixed client rate limit", "qps", o.QPS, "burst", o.Burst, "err", err)
		return fallback
	}
	if !has {
		return fallback
	}
	return RateLimit{QPS: -1, Burst: o.Burst, Source: RateServerFairness}
}

// serverHasFairness sends one GET /version and looks for APF's response headers.
func serverHasFairness(ctx context.Context, cfg *rest.Config) (bool, error) {
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return false, err
	}
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(cfg.Host, "/")+"/version", nil)
	if err != nil {
		return false, err
	}
	if cfg.UserAgent != "" {
		req.Header.Set("User-Agent", cfg.UserAgent)
	}
	rsp, err := client.Do(req)
	if err != nil {
		return false, err
	}
	defer rsp.Body.Close()
	if rsp.StatusCode >= 300 {
		return false, fmt.Errorf("GET /version: %s", rsp.Status)
	}
	for _, h := range apfHeaders {
		if rsp.Header.Get(h) != "" {
			return true, nil
		}
	}
	return false, nil
}

// RegisterRateLimit exposes the chosen limit as the gauge stowage_kube_client_rate_limit_qps (-1: no
// client-side limiter), labelled with its source and burst, so a scrape shows how the process talks to the
// API server.
func RegisterRateLimit(reg prometheus.Registerer, r RateLimit) error {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "stowage_kube_client_rate_limit_qps",
		Help: "Client-side QPS limit towards the Kubernetes API server chosen at start-up; -1 means none (the server's API Priority and Fairness paces the process).",
	}, []string{"source", "burst"})
	if err := reg.Register(g); err != nil {
		return fmt.Errorf("register the client rate limit metric: %w", err)
	}
	g.WithLabelValues(r.Source, strconv.Itoa(r.Burst)).Set(float64(r.QPS))
	return nil
}
