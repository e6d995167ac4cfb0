package stssim

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"k8s.io/client-go/rest"
)

// Listener serves a Server on a loopback port.
type Listener struct {
	// URL is the endpoint for AWS_ENDPOINT_URL_STS.
	URL  string
	http *http.Server
	done chan error
}

// Listen serves s on 127.0.0.1 at a free port until Close.
func Listen(s *Server) (*Listener, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	l := &Listener{URL: "http://" + ln.Addr().String(), http: &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}, done: make(chan error, 1)}
	go func() { l.done <- l.http.Serve(ln) }()
	return l, nil
}

// Close stops serving.
func (l *Listener) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := l.http.Shutdown(ctx)
	if serveErr := <-l.done; !errors.Is(serveErr, http.ErrServerClosed) {
		err = errors.Join(err, serveErr)
	}
	return err
}

// FetchJWKS reads the API server's ServiceAccount issuer keys from /openid/v1/jwks (the same keys a real
// STS gets through the issuer's OIDC discovery document).
func FetchJWKS(ctx context.Context, c rest.Interface) ([]byte, error) {
	b, err := c.Get().AbsPath("/openid/v1/jwks").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("fetch /openid/v1/jwks: %w", err)
	}
	return b, nil
}
