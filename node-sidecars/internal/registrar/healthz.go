package registrar

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"k8s.io/klog/v2"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// healthz answers the container's liveness probe as upstream's does: 404 when the registration socket is gone
// (the kubelet can no longer find the plugin, and a restart re-creates it), 500 when something else answers
// on it, it does not answer, or the kubelet reported a failed registration, 200 "ok" otherwise.
func (r *Registrar) healthz(w http.ResponseWriter, req *http.Request) {
	logger := klog.FromContext(req.Context())
	code, err := r.check(req.Context())
	if err != nil {
		logger.Error(err, "Health check failed")
		http.Error(w, err.Error(), code)
		return
	}
	logger.V(5).Info("Health check succeeded")
	_, _ = fmt.Fprint(w, "ok")
}

// check returns the HTTP status of the health check and, for a failure, why.
func (r *Registrar) check(ctx context.Context) (int, error) {
	if _, failure := r.service.status(); failure != nil {
		return http.StatusInternalServerError, failure
	}
	switch err := socketState(r.socket); {
	case errors.Is(err, fs.ErrNotExist):
		return http.StatusNotFound, fmt.Errorf("registration socket %s does not exist", r.socket)
	case err != nil:
		return http.StatusInternalServerError, fmt.Errorf("checking the registration socket: %w", err)
	}
	info, err := getInfo(ctx, r.socket, r.cfg.Timeout)
	if err != nil {
		return http.StatusInternalServerError, err
	}
	if info.GetName() != r.driver || info.GetEndpoint() != r.cfg.KubeletRegistrationPath {
		return http.StatusInternalServerError, fmt.Errorf("registration socket %s answers for driver %q at %q, not %q at %q",
			r.socket, info.GetName(), info.GetEndpoint(), r.driver, r.cfg.KubeletRegistrationPath)
	}
	return http.StatusOK, nil
}

// getInfo calls GetInfo on a registration socket, as the kubelet's plugin watcher does, within timeout.
func getInfo(ctx context.Context, socket string, timeout time.Duration) (*registerapi.PluginInfo, error) {
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("connecting to the registration socket %s: %w", socket, err)
	}
	defer func() { _ = conn.Close() }()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	info, err := registerapi.NewRegistrationClient(conn).GetInfo(ctx, &registerapi.InfoRequest{})
	if err != nil {
		return nil, fmt.Errorf("calling GetInfo on the registration socket %s: %w", socket, err)
	}
	return info, nil
}
