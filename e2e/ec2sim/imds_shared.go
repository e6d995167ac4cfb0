package ec2sim

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"
)

// startSharedIMDS serves Config.IMDSListen: one endpoint for every instance, which answers a caller as the
// instance whose Callers hold the caller's address, and refuses anyone else with 403, as an address that is
// no instance of the account would never reach IMDS at all.
func (s *Server) startSharedIMDS() error {
	ln, err := net.Listen("tcp", s.cfg.IMDSListen)
	if err != nil {
		return fmt.Errorf("ec2sim: listen for the shared IMDS: %w", err)
	}
	s.sharedIMDSURL = "http://" + ln.Addr().String()
	s.sharedIMDS = &http.Server{Handler: http.HandlerFunc(s.serveSharedIMDS), ReadHeaderTimeout: 10 * time.Second}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := s.sharedIMDS.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error(err, "Shared IMDS stopped")
		}
	}()
	return nil
}

func (s *Server) serveSharedIMDS(w http.ResponseWriter, r *http.Request) {
	im := s.imdsOfCaller(r.RemoteAddr)
	if im == nil {
		http.Error(w, "ec2sim: "+r.RemoteAddr+" is no instance's address (Instance.Callers)", http.StatusForbidden)
		return
	}
	im.ServeHTTP(w, r)
}

// imdsOfCaller returns the IMDS of the instance whose Callers hold remoteAddr's IP, or nil.
func (s *Server) imdsOfCaller(remoteAddr string) *imdsServer {
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		return nil
	}
	ip := net.ParseIP(host)
	for id, in := range s.instances {
		if in.Callers != nil && ip != nil && in.Callers.Contains(ip) {
			return s.imds[id]
		}
	}
	return nil
}

// SharedIMDSURL is the endpoint of Config.IMDSListen (AWS_EC2_METADATA_SERVICE_ENDPOINT for every node), or
// "" without it.
func (s *Server) SharedIMDSURL() string { return s.sharedIMDSURL }

func closeHTTP(srv *http.Server) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		_ = srv.Close()
	}
}
