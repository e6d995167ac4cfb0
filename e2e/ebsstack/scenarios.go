package ebsstack

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/stowage-csi/stowage/e2e/ec2sim"
)

// StepTimeout bounds each step that waits for the cluster; it covers EC2's real delays at time scale 1.
const StepTimeout = 5 * time.Minute

// Platform is what the scenarios need of the cluster they run on: Stack (Stowage's binaries as processes,
// kubeletsim as the kubelet; OnStack) or real kubelets with the chart installed (OnRealNodes).
type Platform interface {
	KubeClient() kubernetes.Interface
	RESTConfig() *rest.Config
	EC2() *ec2sim.Server
	// NodeNames lists the nodes in their order.
	NodeNames() []string
	// Node is the named node, nil when there is none.
	Node(name string) PlatformNode
	// VolumeDir holds EC2's volume files: a loop device backed by a file below it is an attached volume.
	VolumeDir() string
	// EnsureSnapshotting starts what takes snapshots (snapshot-controller, csi-snapshotter) if it is not
	// running yet.
	EnsureSnapshotting(ctx context.Context) error
	// CheckResizer fails unless csi-resizer runs.
	CheckResizer(ctx context.Context) error
}

// PlatformNode is one node as the scenarios see it. Its paths are the kubelet's, readable by this process.
type PlatformNode interface {
	Zone() string
	InstanceID() string
	// StagingPath is where the kubelet stages a file-system volume (NodeStage's target).
	StagingPath(volumeHandle string) string
	// PublishPath is where the kubelet publishes a file-system volume of a Pod.
	PublishPath(podUID, pvName string) string
	// DevicePath is the raw block device a Pod's block volume is published as.
	DevicePath(podUID, pvName string) string
	// FSType is the type of the file system mounted at path (one of the paths above), "" if none is.
	FSType(path string) (string, error)
	// CSIMountsLeft lists the CSI volumes' mounts left under the kubelet's root.
	CSIMountsLeft() ([]string, error)
}

// Lifecycle walks EBS volumes through their life on a Platform; the e2e tests and `devcluster demo` run the
// same scenarios. Scenarios 1 to 5 build on each other and run in order; scenarios 6 and 7 stand alone.
type Lifecycle struct {
	P Platform
	R *Report
	// NodeA and NodeB share a zone (the volume moves from A to B); NodeC is in another zone.
	NodeA, NodeB, NodeC string

	volumeID string
	pvName   string
	digest   string
}

// NewLifecycle uses the first three nodes of the stack as A, B and C.
func NewLifecycle(s *Stack, r *Report) (*Lifecycle, error) { return NewLifecycleOn(OnStack(s), r) }

// NewLifecycleOn uses the first three nodes of p as A, B and C.
func NewLifecycleOn(p Platform, r *Report) (*Lifecycle, error) {
	names := p.NodeNames()
	if len(names) < 3 {
		return nil, fmt.Errorf("the lifecycle needs 3 nodes, the platform has %d", len(names))
	}
	l := &Lifecycle{P: p, R: r, NodeA: names[0], NodeB: names[1], NodeC: names[2]}
	if l.zone(l.NodeA) != l.zone(l.NodeB) || l.zone(l.NodeA) == l.zone(l.NodeC) {
		return nil, fmt.Errorf("nodes %s and %s must share a zone and %s be in another", l.NodeA, l.NodeB, l.NodeC)
	}
	return l, nil
}

// node is the named node of the platform; the names come from it, so it is never nil.
func (l *Lifecycle) node(name string) PlatformNode { return l.P.Node(name) }

// zone is the named node's zone.
func (l *Lifecycle) zone(name string) string { return l.P.Node(name).Zone() }

// step is one reported step of a scenario: run returns the line the report prints for it.
type step struct {
	name string
	run  func(ctx context.Context) (string, error)
}

// steps runs each step in order, each under its own StepTimeout, and stops at the first that fails.
func (l *Lifecycle) steps(ctx context.Context, steps ...step) error {
	for _, s := range steps {
		err := l.R.Step(ctx, s.name, func(ctx context.Context) (string, error) {
			ctx, cancel := context.WithTimeout(ctx, StepTimeout)
			defer cancel()
			return s.run(ctx)
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// KeepInUse is what `devcluster demo --keep` leaves behind: PVC data-1 in use by Pod app-1 on node A. It
// needs the ext4 class of scenario 1.
func (l *Lifecycle) KeepInUse(ctx context.Context) error {
	l.R.Scenario("Kept running: PVC data-1 in use by Pod app-1 on " + l.NodeA)
	return l.steps(ctx, step{"Pod app-1 Running", func(ctx context.Context) (string, error) {
		if _, err := l.create(ctx, nil, Claim("data-1", "stowage-ext4", "1Gi", l.NodeA, false), Pod("app-1", l.NodeA, "data-1", false)); err != nil {
			return "", err
		}
		pod, err := l.waitRunning(ctx, "app-1")
		if err != nil {
			return "", err
		}
		claim, err := l.P.KubeClient().CoreV1().PersistentVolumeClaims(Namespace).Get(ctx, "data-1", metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("Pod app-1 Running on %s with PVC data-1 (%s) published at %s", l.NodeA, claim.Spec.VolumeName,
			l.node(l.NodeA).PublishPath(string(pod.UID), claim.Spec.VolumeName)), nil
	}})
}

// debugState reads the emulator's state over HTTP, as a user would with curl.
func (l *Lifecycle) debugState(ctx context.Context) (ec2sim.StateDump, error) {
	var st ec2sim.StateDump
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, l.P.EC2().URL()+"/debug/state", nil)
	if err != nil {
		return st, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return st, fmt.Errorf("GET /debug/state: %s", resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return st, fmt.Errorf("GET /debug/state: %w", err)
	}
	return st, nil
}

func trimMessage(m string) string {
	if i := strings.Index(m, "parameter "); i >= 0 {
		m = m[i:]
	}
	if len(m) > 120 {
		m = m[:120] + "..."
	}
	return m
}
