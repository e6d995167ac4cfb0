// Package ec2sim is an EC2 emulator for the EBS parts of the EC2 Query API, spoken exactly as aws-sdk-go-v2
// sends and parses it. Volumes are sparse files, attachments to an instance on this machine are loop devices
// with the NVMe by-id link Nitro instances expose, and every instance has its own IMDSv2 endpoint.
package ec2sim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"k8s.io/klog/v2"
)

// Config configures an emulator.
type Config struct {
	Listen string // "127.0.0.1:0" when empty
	// IMDSListen, when set, also serves every instance's IMDS at this one address, answering each caller as
	// the instance whose Callers hold its address (real nodes share one endpoint, as instances share
	// 169.254.169.254). Each instance keeps its own loopback endpoint too (IMDSURL).
	IMDSListen    string
	DataDir       string // state + volume files; required
	Region        string // default "us-east-1"
	Zones         []string
	Instances     []Instance
	DeviceLinkDir string  // default DataDir/dev/disk/by-id
	TimeScale     float64 // 1.0 = EC2's real delays (the default); 0.01 for fast tests
	Faults        Faults
	Credentials   *Credentials // if set, verify SigV4 signatures against them
	Logger        klog.Logger
	// Limits are the request rate limits: EC2's per-action model (EC2Limits), or the older buckets per action
	// class; the zero value is unlimited.
	Limits Limits
	// ModifyCooldown refuses a new ModifyVolume until this long after the previous one started (EC2: 6 h).
	// Zero disables it. It is not scaled by TimeScale.
	ModifyCooldown time.Duration
	// AccountID is the owner of every resource; default "123456789012".
	AccountID string
	// Quotas are the account's EBS quotas (storage per volume type, snapshots); zero means unlimited.
	Quotas Quotas
}

// Instance is a simulated EC2 instance.
type Instance struct {
	ID, Zone, Type string
	// Local marks the instance as this machine: attaching a volume to it creates a loop device.
	Local bool
	// Callers are the addresses the shared IMDS endpoint (Config.IMDSListen) answers as this instance: a real
	// node's Pod range, so a node plugin Pod learns its own instance as it would from 169.254.169.254.
	Callers *net.IPNet
}

// Credentials are the static AWS credentials requests must be signed with.
type Credentials struct {
	AccessKeyID, SecretAccessKey string
}

// Server is a running emulator.
type Server struct {
	cfg     Config
	log     klog.Logger
	dataDir string

	mu        sync.Mutex
	st        *state
	instances map[string]Instance
	zones     []string
	loops     *loopManager

	faults   *faultInjector
	inFlight inFlight
	quotas   *quotaHolder
	limits   *limiter
	metrics  *metrics

	ln      net.Listener
	httpSrv *http.Server
	imds    map[string]*imdsServer
	// sharedIMDS serves Config.IMDSListen; nil without it.
	sharedIMDS    *http.Server
	sharedIMDSURL string

	// clock times every transition (time.Now outside tests).
	clock func() time.Time

	stop      chan struct{}
	wg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error
}

// Start loads the state in cfg.DataDir (re-creating loop devices for volumes attached to local instances) and
// serves the EC2 API and each instance's IMDS until ctx ends or Close is called.
func Start(ctx context.Context, cfg Config) (*Server, error) {
	return start(ctx, cfg, time.Now)
}

// start is Start with the clock transitions are timed by; tests pass one they move by hand. It goes in phases:
// settle the config, build the server, load the state left on disk, then serve.
func start(ctx context.Context, cfg Config, clock func() time.Time) (*Server, error) {
	cfg, err := withDefaults(cfg)
	if err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log.GetSink() == nil {
		log = klog.FromContext(ctx)
	}
	s := &Server{
		cfg:       cfg,
		log:       log.WithName("ec2sim"),
		dataDir:   cfg.DataDir,
		instances: map[string]Instance{},
		zones:     cfg.Zones,
		faults:    newFaultInjector(cfg.Faults),
		quotas:    &quotaHolder{q: cfg.Quotas.clone()},
		limits:    newLimiter(cfg.Limits, clock),
		metrics:   newMetrics(),
		imds:      map[string]*imdsServer{},
		stop:      make(chan struct{}),
		clock:     clock,
	}
	if err := s.addInstances(cfg.Instances); err != nil {
		return nil, err
	}
	if err := s.load(); err != nil {
		return nil, err
	}
	if err := s.serve(ctx); err != nil {
		_ = s.Close()
		return nil, err
	}
	s.log.Info("EC2 emulator started", "url", s.URL(), "dataDir", s.dataDir, "timeScale", cfg.TimeScale)
	return s, nil
}

// withDefaults checks cfg and fills in what was left empty; DataDir comes back absolute.
func withDefaults(cfg Config) (Config, error) {
	if cfg.DataDir == "" {
		return cfg, errors.New("ec2sim: DataDir is required")
	}
	if cfg.TimeScale < 0 {
		return cfg, fmt.Errorf("ec2sim: TimeScale %v is negative", cfg.TimeScale)
	}
	if cfg.TimeScale == 0 {
		cfg.TimeScale = 1
	}
	if err := cfg.Faults.validate(); err != nil {
		return cfg, fmt.Errorf("ec2sim: faults: %w", err)
	}
	if t := cfg.Limits.PerAction; t != nil {
		if err := t.validate(); err != nil {
			return cfg, fmt.Errorf("ec2sim: %w", err)
		}
	}
	if cfg.Listen == "" {
		cfg.Listen = "127.0.0.1:0"
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	if len(cfg.Zones) == 0 {
		cfg.Zones = []string{cfg.Region + "a", cfg.Region + "b", cfg.Region + "c"}
	}
	if cfg.AccountID == "" {
		cfg.AccountID = "123456789012"
	}
	dataDir, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		return cfg, fmt.Errorf("ec2sim: data dir: %w", err)
	}
	cfg.DataDir = dataDir
	if cfg.DeviceLinkDir == "" {
		cfg.DeviceLinkDir = filepath.Join(dataDir, "dev", "disk", "by-id")
	}
	return cfg, nil
}

// addInstances checks each configured instance and gives it the default type if it has none.
func (s *Server) addInstances(instances []Instance) error {
	for _, in := range instances {
		if !strings.HasPrefix(in.ID, "i-") {
			return fmt.Errorf("ec2sim: instance ID %q must start with i-", in.ID)
		}
		if !s.validZone(in.Zone) {
			return fmt.Errorf("ec2sim: instance %s: zone %q is not one of %v", in.ID, in.Zone, s.zones)
		}
		if in.Type == "" {
			in.Type = "m5.large"
		}
		if _, ok := instanceTypes[in.Type]; !ok {
			return fmt.Errorf("ec2sim: instance %s: unknown instance type %q", in.ID, in.Type)
		}
		s.instances[in.ID] = in
	}
	return nil
}

// load reads the state a previous run left in the data dir, removes files it does not know, and brings the
// loop devices up to date: a predecessor killed without Close leaves its devices behind, and they are taken
// down before the transitions due now re-create those of attached volumes.
func (s *Server) load() error {
	for _, d := range []string{s.dataDir, filepath.Join(s.dataDir, "volumes"), filepath.Join(s.dataDir, "snapshots")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("ec2sim: %w", err)
		}
	}
	st, err := loadState(s.dataDir)
	if err != nil {
		return fmt.Errorf("ec2sim: %w", err)
	}
	s.st = st
	s.removeOrphans()
	s.loops = newLoopManager(s.log, s.cfg.DeviceLinkDir, filepath.Join(s.dataDir, "volumes"))
	s.loops.releaseStale()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.settle(s.clock()) {
		s.persist()
	}
	return nil
}

// serve starts the EC2 endpoint, each instance's IMDS and the ticker. The caller closes the server if it fails
// part-way.
func (s *Server) serve(ctx context.Context) error {
	ln, err := net.Listen("tcp", s.cfg.Listen)
	if err != nil {
		return fmt.Errorf("ec2sim: listen: %w", err)
	}
	s.ln = ln
	s.httpSrv = &http.Server{Handler: s.routes(), ReadHeaderTimeout: 10 * time.Second}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := s.httpSrv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error(err, "EC2 endpoint stopped")
		}
	}()
	for _, in := range s.instances {
		im, err := startIMDS(s, in)
		if err != nil {
			return fmt.Errorf("ec2sim: IMDS for %s: %w", in.ID, err)
		}
		s.imds[in.ID] = im
	}
	if s.cfg.IMDSListen != "" {
		if err := s.startSharedIMDS(); err != nil {
			return err
		}
	}
	s.wg.Add(1)
	go s.tick(ctx)
	return nil
}

// URL is the EC2 endpoint (AWS_EC2_ENDPOINT / BaseEndpoint).
func (s *Server) URL() string { return "http://" + s.ln.Addr().String() }

// IMDSURL is the instance's metadata endpoint (AWS_EC2_METADATA_SERVICE_ENDPOINT), or "" for an unknown instance.
func (s *Server) IMDSURL(instanceID string) string {
	im, ok := s.imds[instanceID]
	if !ok {
		return ""
	}
	return im.url()
}

// SetFaults replaces the fault profile.
func (s *Server) SetFaults(f Faults) { s.faults.set(f) }

// Faults returns the fault profile in force.
func (s *Server) Faults() Faults { return s.faults.get() }

// FaultSeed is the seed of the faults in force: Faults.Seed, or the one picked because it was zero. A run
// that prints it can be replayed with Faults.Seed set to it.
func (s *Server) FaultSeed() uint64 { return s.faults.currentSeed() }

// Quotas returns the account's quotas.
func (s *Server) Quotas() Quotas { return s.quotas.get() }

// Close stops serving and takes down every loop device and link this server made. The state on disk keeps
// the attachments; the next Start re-creates their devices.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		close(s.stop)
		var errs []error
		if s.httpSrv != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			if err := s.httpSrv.Shutdown(ctx); err != nil {
				_ = s.httpSrv.Close()
			}
			cancel()
		}
		for _, im := range s.imds {
			im.close()
		}
		if s.sharedIMDS != nil {
			closeHTTP(s.sharedIMDS)
		}
		s.wg.Wait()
		s.mu.Lock()
		if s.loops != nil {
			errs = append(errs, s.loops.releaseAll())
		}
		s.mu.Unlock()
		s.closeErr = errors.Join(errs...)
	})
	return s.closeErr
}

// tick drives the side effects of transitions (loop devices appearing, files growing) without waiting for a
// request to observe them.
func (s *Server) tick(ctx context.Context) {
	defer s.wg.Done()
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-ctx.Done():
			go func() { _ = s.Close() }()
			return
		case <-t.C:
			s.mu.Lock()
			if s.settle(s.clock()) {
				s.persist()
			}
			s.mu.Unlock()
		}
	}
}

// persist saves the state; failing to is logged, as the in-memory state stays authoritative.
func (s *Server) persist() {
	if err := s.st.save(s.dataDir); err != nil {
		s.log.Error(err, "Persisting state")
	}
}

// scaled turns an EC2 delay into this emulator's.
func (s *Server) scaled(d time.Duration) time.Duration {
	return time.Duration(float64(d) * s.cfg.TimeScale)
}

// jitter returns a delay between lo and hi at time scale 1.
func jitter(lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	return lo + time.Duration(rand.Int64N(int64(hi-lo)))
}

func (s *Server) validZone(z string) bool {
	for _, v := range s.zones {
		if v == z {
			return true
		}
	}
	return false
}

// zoneID derives an AZ ID in EC2's style: us-east-1a -> use1-az1.
func (s *Server) zoneID(zone string) string {
	parts := strings.Split(s.cfg.Region, "-")
	short := ""
	for i, p := range parts {
		if i == 0 || i == len(parts)-1 {
			short += p
		} else if p != "" {
			short += p[:1]
		}
	}
	for i, z := range s.zones {
		if z == zone {
			return fmt.Sprintf("%s-az%d", short, i+1)
		}
	}
	return ""
}

func (s *Server) zoneByID(id string) (string, bool) {
	for _, z := range s.zones {
		if s.zoneID(z) == id {
			return z, true
		}
	}
	return "", false
}

func (s *Server) volumePath(id string) string {
	return filepath.Join(s.dataDir, "volumes", id+".img")
}

func (s *Server) snapshotPath(id string) string {
	return filepath.Join(s.dataDir, "snapshots", id+".img")
}

// readBody bounds request bodies; EC2's own limit is far below a few MiB.
func readBody(r *http.Request) (string, error) {
	b, err := io.ReadAll(io.LimitReader(r.Body, 4<<20))
	return string(b), err
}
