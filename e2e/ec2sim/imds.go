package ec2sim

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// imdsServer is one instance's IMDSv2 endpoint, on a listener of its own (real instances all use
// 169.254.169.254; here each gets a port).
type imdsServer struct {
	s      *Server
	in     Instance
	ln     net.Listener
	srv    *http.Server
	mu     sync.Mutex
	tokens map[string]time.Time
}

func startIMDS(s *Server, in Instance) (*imdsServer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	im := &imdsServer{s: s, in: in, ln: ln, tokens: map[string]time.Time{}}
	im.srv = &http.Server{Handler: im, ReadHeaderTimeout: 10 * time.Second}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := im.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error(err, "IMDS stopped", "instance", in.ID)
		}
	}()
	return im, nil
}

func (im *imdsServer) url() string { return "http://" + im.ln.Addr().String() }

func (im *imdsServer) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := im.srv.Shutdown(ctx); err != nil {
		_ = im.srv.Close()
	}
}

func (im *imdsServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/latest/api/token" {
		im.serveToken(w, r)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		http.Error(w, "", http.StatusMethodNotAllowed)
		return
	}
	if !im.validToken(r.Header.Get("X-aws-ec2-metadata-token")) {
		// IMDSv2 is required: no or a bad token is 401, as on instances with HttpTokens=required.
		http.Error(w, "", http.StatusUnauthorized)
		return
	}
	body, ok := im.lookup(r.URL.Path)
	if !ok {
		http.NotFound(w, r)
		return
	}
	if strings.HasSuffix(r.URL.Path, "/document") {
		w.Header().Set("Content-Type", "application/json")
	} else {
		w.Header().Set("Content-Type", "text/plain")
	}
	_, _ = w.Write([]byte(body))
}

func (im *imdsServer) serveToken(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPut {
		http.Error(w, "", http.StatusMethodNotAllowed)
		return
	}
	ttl, err := strconv.Atoi(r.Header.Get("X-aws-ec2-metadata-token-ttl-seconds"))
	if err != nil || ttl < 1 || ttl > 21600 {
		http.Error(w, "", http.StatusBadRequest)
		return
	}
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	tok := base64.RawURLEncoding.EncodeToString(b)
	im.mu.Lock()
	now := time.Now()
	for t, exp := range im.tokens {
		if now.After(exp) {
			delete(im.tokens, t)
		}
	}
	im.tokens[tok] = now.Add(time.Duration(ttl) * time.Second)
	im.mu.Unlock()
	w.Header().Set("X-Aws-Ec2-Metadata-Token-Ttl-Seconds", strconv.Itoa(ttl))
	w.Header().Set("Content-Type", "text/plain")
	_, _ = w.Write([]byte(tok))
}

func (im *imdsServer) validToken(tok string) bool {
	if tok == "" {
		return false
	}
	im.mu.Lock()
	defer im.mu.Unlock()
	exp, ok := im.tokens[tok]
	return ok && time.Now().Before(exp)
}

// lookup answers a metadata path: a leaf's value, or a directory's listing (children, directories with a
// trailing slash), with or without the directory's own trailing slash.
func (im *imdsServer) lookup(path string) (string, bool) {
	tree := im.tree()
	p := strings.TrimSuffix(path, "/")
	if v, ok := tree[p]; ok {
		return v, true
	}
	prefix := p + "/"
	children := map[string]bool{}
	for k := range tree {
		rest, ok := strings.CutPrefix(k, prefix)
		if !ok {
			continue
		}
		if head, _, nested := strings.Cut(rest, "/"); nested {
			children[head+"/"] = true
		} else {
			children[rest] = true
		}
	}
	if len(children) == 0 {
		return "", false
	}
	names := make([]string, 0, len(children))
	for c := range children {
		names = append(names, c)
	}
	sort.Strings(names)
	return strings.Join(names, "\n"), true
}

func (im *imdsServer) tree() map[string]string {
	in := im.in
	fx := facts(in.ID)
	region := im.s.cfg.Region
	md := "/latest/meta-data/"
	mac := md + "network/interfaces/macs/" + fx.mac + "/"
	doc, _ := json.Marshal(map[string]any{
		"accountId": im.s.cfg.AccountID, "architecture": "x86_64", "availabilityZone": in.Zone,
		"imageId": "ami-0123456789abcdef0", "instanceId": in.ID, "instanceType": in.Type,
		"pendingTime": ts(launchTime), "privateIp": fx.ip, "region": region, "version": "2017-09-30",
	})
	return map[string]string{
		md + "ami-id":                                "ami-0123456789abcdef0",
		md + "instance-id":                           in.ID,
		md + "instance-type":                         in.Type,
		md + "local-ipv4":                            fx.ip,
		md + "local-hostname":                        fx.dns,
		md + "hostname":                              fx.dns,
		md + "mac":                                   fx.mac,
		md + "placement/availability-zone":           in.Zone,
		md + "placement/availability-zone-id":        im.s.zoneID(in.Zone),
		md + "placement/region":                      region,
		md + "block-device-mapping/ami":              rootDevice,
		md + "block-device-mapping/root":             rootDevice,
		mac + "device-number":                        "0",
		mac + "interface-id":                         fx.eni,
		mac + "local-ipv4s":                          fx.ip,
		mac + "mac":                                  fx.mac,
		"/latest/dynamic/instance-identity/document": string(doc),
	}
}
