// Package kubeclient builds the Kubernetes clients of a Stowage binary from --kubeconfig and --master (or the
// in-cluster service account), --kube-api-qps, --kube-api-burst and the user agent "<binary>/<version>".
//
// Core API clients speak protobuf, which the API server encodes and decodes several times faster than JSON;
// clients for custom resources (VolumeSnapshots, MountpointS3PodAttachments) must use JSON, because the API
// server serves CRDs only as JSON.
package kubeclient

import (
	"context"
	"fmt"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
)

const (
	protobuf = "application/vnd.kubernetes.protobuf"
	// protobufAccept falls back to JSON for the few core responses that have no protobuf form.
	protobufAccept = "application/vnd.kubernetes.protobuf,application/json"
	jsonType       = "application/json"
)

// Options select the API server and how politely to talk to it.
type Options struct {
	// Kubeconfig is --kubeconfig. With Master also empty, the in-cluster configuration is used.
	Kubeconfig string
	// Master is the API server URL of upstream's provisioner flag --master; it overrides the server named
	// in Kubeconfig, and with Kubeconfig empty it is the whole configuration (no credentials), as
	// clientcmd.BuildConfigFromFlags treats it.
	Master string
	// QPS and Burst are --kube-api-qps and --kube-api-burst. With AdaptiveRate they are only the fallback for
	// an API server without API Priority and Fairness (see chooseRate).
	QPS   float32
	Burst int
	// AdaptiveRate is set when neither flag was given on the command line.
	AdaptiveRate bool
	// UserAgent is "<binary>/<version>" (version.UserAgent).
	UserAgent string
}

// RESTConfig loads the configuration and applies QPS, burst and user agent. It leaves the content type alone;
// ForCore and ForCRDs set it.
func RESTConfig(o Options) (*rest.Config, error) {
	var (
		cfg *rest.Config
		err error
	)
	switch {
	case o.Master != "":
		cfg, err = clientcmd.BuildConfigFromFlags(o.Master, o.Kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("loading --master %q with --kubeconfig %q: %w", o.Master, o.Kubeconfig, err)
		}
	case o.Kubeconfig != "":
		cfg, err = clientcmd.BuildConfigFromFlags("", o.Kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("loading --kubeconfig %q: %w", o.Kubeconfig, err)
		}
	default:
		cfg, err = rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("loading the in-cluster configuration (set --kubeconfig when running outside a cluster): %w", err)
		}
	}
	cfg.QPS = o.QPS
	cfg.Burst = o.Burst
	cfg.UserAgent = o.UserAgent
	return cfg, nil
}

// ForCore returns a copy of cfg that speaks protobuf, for clientsets of built-in types.
func ForCore(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.ContentType = protobuf
	c.AcceptContentTypes = protobufAccept
	return c
}

// ForCRDs returns a copy of cfg that speaks JSON, for clientsets of custom resources.
func ForCRDs(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.ContentType = jsonType
	c.AcceptContentTypes = jsonType
	return c
}

// Clients are the clientsets every sidecar needs.
type Clients struct {
	// Config is the loaded configuration, without content type; build CRD clientsets from ForCRDs(Config).
	Config *rest.Config
	// Kube is the main clientset (protobuf).
	Kube kubernetes.Interface
	// LeaderElection is a separate clientset with its own rate limiter, so lease renewals never queue behind a
	// busy controller's requests (upstream does the same).
	LeaderElection kubernetes.Interface
	// RateLimit is the client-side limit chosen at start-up.
	RateLimit RateLimit
}

// New loads the configuration, chooses the client-side rate limit (asking the API server once whether it
// has API Priority and Fairness when the flags were not given) and builds the clientsets.
func New(ctx context.Context, o Options) (*Clients, error) {
	cfg, err := RESTConfig(o)
	if err != nil {
		return nil, err
	}
	rate := chooseRate(ctx, cfg, o)
	cfg.QPS, cfg.Burst = rate.QPS, rate.Burst
	klog.FromContext(ctx).Info("Kubernetes client rate limit", "source", rate.Source, "unlimited", rate.Unlimited(), "qps", rate.QPS, "burst", rate.Burst)
	kube, err := kubernetes.NewForConfig(ForCore(cfg))
	if err != nil {
		return nil, fmt.Errorf("creating the Kubernetes client: %w", err)
	}
	le, err := kubernetes.NewForConfig(ForCore(cfg))
	if err != nil {
		return nil, fmt.Errorf("creating the leader election client: %w", err)
	}
	return &Clients{Config: cfg, Kube: kube, LeaderElection: le, RateLimit: rate}, nil
}
