//go:build e2e || bench

package ebsdriver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/stowage-csi/stowage/e2e/ec2sim"
	"github.com/stowage-csi/stowage/e2e/rig"
)

const (
	testRegion = "us-east-1"
	testZone   = "us-east-1a"
)

// buildPlugin compiles the repository's ebs-plugin into a temporary directory.
func buildPlugin(t testing.TB) string {
	t.Helper()
	root, err := rig.RepoRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	bin, err := rig.BuildCommand(context.Background(), root, "ebs-plugin", "ebs-plugin", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

func randomHex(n int) string {
	b := make([]byte, (n+1)/2)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)[:n]
}

// startSim starts the EC2 emulator with the given instances; it is closed (loop devices and links removed)
// when the test ends.
func startSim(t testing.TB, timeScale float64, instances []ec2sim.Instance) (*ec2sim.Server, string) {
	t.Helper()
	dir := t.TempDir()
	linkDir := filepath.Join(dir, "by-id")
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := ec2sim.Start(ctx, ec2sim.Config{
		Listen: "127.0.0.1:0", DataDir: filepath.Join(dir, "ec2"), Region: testRegion,
		Zones: []string{"us-east-1a", "us-east-1b", "us-east-1c"}, Instances: instances,
		DeviceLinkDir: linkDir, TimeScale: timeScale,
	})
	if err != nil {
		cancel()
		t.Fatalf("start ec2sim: %v", err)
	}
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Errorf("close ec2sim: %v", err)
		}
		cancel()
	})
	return srv, linkDir
}

// pluginEnv is the plugin's whole environment: nothing is inherited, so AWS_CA_BUNDLE, AWS_PROFILE and any
// real credentials of the machine cannot leak in. creds adds static test credentials.
func pluginEnv(t testing.TB, sim *ec2sim.Server, instanceID string, creds bool) []string {
	env := []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + t.TempDir(),
		"AWS_REGION=" + testRegion,
		"AWS_EC2_ENDPOINT=" + sim.URL(),
		"AWS_CONFIG_FILE=/dev/null",
		"AWS_SHARED_CREDENTIALS_FILE=/dev/null",
	}
	if instanceID != "" {
		env = append(env, "AWS_EC2_METADATA_SERVICE_ENDPOINT="+sim.IMDSURL(instanceID))
	}
	if creds {
		env = append(env, "AWS_ACCESS_KEY_ID=AKIDSTOWAGETEST", "AWS_SECRET_ACCESS_KEY=stowage-test-secret")
	}
	return env
}

// startLocalPlugin starts the emulator with one local instance (real loop devices) and an all-in-one
// ebs-plugin on it, with extra arguments for the plugin. Loop devices and mounts need root.
func startLocalPlugin(t testing.TB, instanceID string, extra ...string) (*ec2sim.Server, *plugin) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("needs root for loop devices and mounts")
	}
	sim, linkDir := startSim(t, 0.01, []ec2sim.Instance{{ID: instanceID, Zone: testZone, Type: "m5.large", Local: true}})
	args := append([]string{"all", "--device-link-dir=" + linkDir, "--metadata-sources=imds"}, extra...)
	return sim, startPlugin(t, buildPlugin(t), pluginEnv(t, sim, instanceID, true), args...)
}

// startController starts the emulator with one (not local) instance and ebs-plugin's controller service.
func startController(t testing.TB, instanceID string) (*ec2sim.Server, *plugin) {
	t.Helper()
	sim, _ := startSim(t, 0.01, []ec2sim.Instance{{ID: instanceID, Zone: testZone, Type: "m5.large"}})
	return sim, startPlugin(t, buildPlugin(t), pluginEnv(t, sim, "", true), "controller")
}

type plugin struct {
	socket  string
	metrics string
	conn    *grpc.ClientConn
}

// startPlugin runs the binary and waits until it answers Probe. It is stopped with SIGTERM (then SIGKILL)
// when the test ends (see rig.Process).
func startPlugin(t testing.TB, bin string, env []string, args ...string) *plugin {
	t.Helper()
	dir, err := os.MkdirTemp("", "ebs-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	p := &plugin{socket: filepath.Join(dir, "csi.sock")}
	p.metrics = rig.FreeAddr(t)
	args = append(args, "--endpoint=unix://"+p.socket, "--http-endpoint="+p.metrics, "--v=4")
	proc, err := rig.Start(rig.Spec{Name: "plugin", Path: bin, Args: args, Env: env, LogDir: t.TempDir()})
	if err != nil {
		t.Fatalf("start ebs-plugin: %v", err)
	}
	t.Cleanup(func() {
		proc.Stop(15 * time.Second)
		if t.Failed() {
			t.Logf("ebs-plugin log (tail):\n%s", proc.Tail(200))
		}
	})
	conn, err := grpc.NewClient("unix://"+p.socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	p.conn = conn
	rig.Eventually(t, context.Background(), time.Minute, "ebs-plugin to answer Probe", func(ctx context.Context) (bool, error) {
		if done, err := proc.Exited(); done {
			b, _ := os.ReadFile(proc.LogPath)
			t.Fatalf("ebs-plugin exited before serving: %v\n%s", err, b)
		}
		ctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		_, err := csi.NewIdentityClient(conn).Probe(ctx, &csi.ProbeRequest{})
		return err == nil, err
	})
	return p
}

// requestsTotal is one series of the emulator's ec2sim_requests_total: its labels and its value.
var requestsTotal = regexp.MustCompile(`(?m)^ec2sim_requests_total\{([^}]*)\} (\S+)$`)

// scrapeRequests sums the emulator's ec2sim_requests_total by one label ("action" or "code").
func scrapeRequests(t testing.TB, url, label string) map[string]float64 {
	t.Helper()
	code, body := rig.Get(t, context.Background(), url)
	if code != http.StatusOK {
		t.Fatalf("scrape %s: HTTP %d", url, code)
	}
	labelValue := regexp.MustCompile(`(?:^|,)` + regexp.QuoteMeta(label) + `="([^"]*)"`)
	out := map[string]float64{}
	for _, m := range requestsTotal.FindAllStringSubmatch(body, -1) {
		l := labelValue.FindStringSubmatch(m[1])
		v, err := strconv.ParseFloat(m[2], 64)
		if l == nil || err != nil {
			t.Fatalf("scrape %s: unexpected series %s", url, m[0])
		}
		out[l[1]] += v
	}
	return out
}

// idGen makes IDs in EC2's shapes, so "does not exist" cases reach the emulator instead of being refused
// by the driver's ID check alone.
type idGen struct{}

func (idGen) GenerateUniqueValidVolumeID() string { return "vol-0" + randomHex(16) }
func (idGen) GenerateInvalidVolumeID() string     { return "not-a-volume-id" }
func (idGen) GenerateUniqueValidNodeID() string   { return "i-0" + randomHex(16) }
func (idGen) GenerateInvalidNodeID() string       { return "not-an-instance-id" }
