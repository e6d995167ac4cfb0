// Package httpserver is the one diagnostics HTTP server of a sidecar or driver (--http-endpoint, or the
// deprecated --metrics-address): Prometheus metrics at --metrics-path and health checks such as
// /healthz/leader-election, over plain HTTP or, with a certificate, HTTPS.
package httpserver

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"k8s.io/klog/v2"
)

// shutdownTimeout bounds how long a graceful stop waits for in-flight scrapes.
const shutdownTimeout = 5 * time.Second

// Server is a bound listener and its handlers. Handlers may be added until and after Serve starts.
type Server struct {
	listener net.Listener
	mux      *http.ServeMux
	srv      *http.Server
	// tls is set for a server from ListenTLS. It is kept apart from srv.TLSConfig, which net/http fills in
	// for plain servers too.
	tls *tls.Config
}

// Listen binds addr (":8080", "127.0.0.1:0"...) right away, so a port conflict fails start-up and tests can
// read the chosen port from Addr.
func Listen(addr string) (*Server, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listening on %q for the HTTP endpoint: %w", addr, err)
	}
	mux := http.NewServeMux()
	return &Server{
		listener: l,
		mux:      mux,
		srv:      &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second},
	}, nil
}

// ListenTLS is Listen for a server that answers only HTTPS, with the PEM certificate (chain) and key in
// certFile and keyFile. The pair is read here, so a missing or mismatched file fails start-up rather than
// the first scrape.
func ListenTLS(addr, certFile, keyFile string) (*Server, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("loading the HTTP endpoint's TLS certificate %q and key %q: %w", certFile, keyFile, err)
	}
	s, err := Listen(addr)
	if err != nil {
		return nil, err
	}
	s.tls = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	s.srv.TLSConfig = s.tls
	return s, nil
}

// Addr is the address the server listens on.
func (s *Server) Addr() net.Addr { return s.listener.Addr() }

// URL returns "http://<addr><path>", or "https://..." for a server from ListenTLS.
func (s *Server) URL(path string) string {
	scheme := "http"
	if s.tls != nil {
		scheme = "https"
	}
	return scheme + "://" + s.listener.Addr().String() + path
}

// Handle registers h for pattern (net/http ServeMux syntax).
func (s *Server) Handle(pattern string, h http.Handler) { s.mux.Handle(pattern, h) }

// HandleCheck serves a health check at path: 200 "ok" when check returns nil, 500 with the error otherwise.
func (s *Server) HandleCheck(path string, check func(*http.Request) error) {
	s.mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
		if err := check(r); err != nil {
			http.Error(w, fmt.Sprintf("internal server error: %v", err), http.StatusInternalServerError)
			return
		}
		_, _ = fmt.Fprint(w, "ok")
	})
}

// Serve answers requests until ctx is cancelled, then shuts down gracefully. It returns nil after a clean
// shutdown and the serve error otherwise.
func (s *Server) Serve(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	errc := make(chan error, 1)
	go func() {
		if s.tls != nil {
			// Empty file names: the certificate is already in TLSConfig.
			errc <- s.srv.ServeTLS(s.listener, "", "")
			return
		}
		errc <- s.srv.Serve(s.listener)
	}()
	logger.Info("HTTP endpoint serving", "address", s.Addr().String(), "tls", s.tls != nil)
	select {
	case err := <-errc:
		return fmt.Errorf("HTTP endpoint %s: %w", s.Addr(), err)
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	if err := s.srv.Shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("shutting down HTTP endpoint %s: %w", s.Addr(), err)
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("HTTP endpoint %s: %w", s.Addr(), err)
	}
	return nil
}
