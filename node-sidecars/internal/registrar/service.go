package registrar

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"k8s.io/klog/v2"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// service answers the kubelet's plugin watcher: GetInfo names the driver and its socket, and
// NotifyRegistrationStatus tells how the kubelet's registration went.
type service struct {
	registerapi.UnimplementedRegistrationServer

	driver   string
	endpoint string

	mu sync.Mutex
	// registered is true once the kubelet reported a successful registration; failure is set when it reported a
	// failed one.
	registered bool
	failure    error
	// failed is closed on the first failure, which ends the registrar: upstream exits so that the container
	// restarts and the kubelet sees a fresh socket to register again.
	failed chan struct{}
}

func newService(driver, endpoint string) *service {
	return &service{driver: driver, endpoint: endpoint, failed: make(chan struct{})}
}

// GetInfo is the plugin watcher's first call on a new socket.
func (s *service) GetInfo(ctx context.Context, req *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	klog.FromContext(ctx).V(2).Info("Received GetInfo call")
	return &registerapi.PluginInfo{
		Type:              registerapi.CSIPlugin,
		Name:              s.driver,
		Endpoint:          s.endpoint,
		SupportedVersions: []string{pluginAPIVersion},
	}, nil
}

// NotifyRegistrationStatus is the plugin watcher's report once the kubelet has validated and registered, or
// refused, the plugin.
func (s *service) NotifyRegistrationStatus(ctx context.Context, st *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	logger := klog.FromContext(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	if st.GetPluginRegistered() {
		logger.Info("The kubelet registered the driver", "driver", s.driver, "endpoint", s.endpoint)
		s.registered = true
		return &registerapi.RegistrationStatusResponse{}, nil
	}
	err := fmt.Errorf("the kubelet failed to register driver %s: %w", s.driver, errors.New(st.GetError()))
	logger.Error(err, "Registration failed, stopping so that the container restarts")
	if s.failure == nil {
		s.failure = err
		close(s.failed)
	}
	s.registered = false
	return &registerapi.RegistrationStatusResponse{}, nil
}

// status returns whether the kubelet has registered the driver, and its failure if it reported one.
func (s *service) status() (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.registered, s.failure
}
