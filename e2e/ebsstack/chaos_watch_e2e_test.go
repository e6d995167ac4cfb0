//go:build e2e

package ebsstack

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stowage-csi/stowage/e2e/ec2sim"
	"github.com/stowage-csi/stowage/e2e/rig"
)

// checkLogs fails on a panic or fatal runtime error in any Stowage process's log, restarts included.
func checkLogs(t *testing.T, s *Stack) {
	t.Helper()
	for _, p := range s.Processes() {
		b, err := os.ReadFile(p.LogPath)
		if err != nil {
			t.Errorf("read %s: %v", p.LogPath, err)
			continue
		}
		for _, bad := range []string{"panic:", "fatal error:", "DATA RACE"} {
			if i := strings.Index(string(b), bad); i >= 0 {
				end := min(len(b), i+2000)
				t.Errorf("%s logged %q:\n%s", p.Name, bad, b[i:end])
			}
		}
	}
}

// watch samples EC2's attachments and the VolumeAttachments while the test runs and records every moment
// a volume is attached to two instances, or attached by two VolumeAttachments.
type watch struct {
	cancel context.CancelFunc
	done   chan struct{}
	n      int
	seen   []string
	// listed counts the samples whose VolumeAttachment list succeeded; listErr is the last that failed (an
	// API server busy with two cores' worth of chaos may time a list out; that sample is skipped).
	listed  int
	listErr error
}

func startWatch(ctx context.Context, s *Stack) *watch {
	ctx, cancel := context.WithCancel(ctx)
	w := &watch{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			w.sample(ctx, s)
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return w
}

func (w *watch) sample(ctx context.Context, s *Stack) {
	w.n++
	byVolume := map[string][]string{}
	for _, a := range s.EC2.State().Attachments {
		byVolume[a.VolumeID] = append(byVolume[a.VolumeID], a.InstanceID+"/"+a.State)
	}
	for vol, atts := range byVolume {
		if len(atts) > 1 {
			w.record(fmt.Sprintf("EC2 %s attached to %v", vol, atts))
		}
	}
	vas, err := s.Client.StorageV1().VolumeAttachments().List(ctx, metav1.ListOptions{})
	if err != nil {
		if ctx.Err() == nil {
			w.listErr = err
		}
		return
	}
	w.listed++
	byPV := map[string][]string{}
	for _, va := range vas.Items {
		if va.Status.Attached && va.Spec.Source.PersistentVolumeName != nil {
			byPV[*va.Spec.Source.PersistentVolumeName] = append(byPV[*va.Spec.Source.PersistentVolumeName], va.Spec.NodeName)
		}
	}
	for pv, nodes := range byPV {
		if len(nodes) > 1 {
			w.record(fmt.Sprintf("PV %s attached by VolumeAttachments to %v", pv, nodes))
		}
	}
}

func (w *watch) record(v string) {
	v = time.Now().Format("15:04:05.000 ") + v
	if len(w.seen) < 20 {
		w.seen = append(w.seen, v)
	}
}

// stop ends the watcher and waits for it; it may be called more than once.
func (w *watch) stop() {
	w.cancel()
	<-w.done
}

// report fails the test for every double attachment seen, or if no VolumeAttachment list succeeded; it
// may only be called after stop.
func (w *watch) report(t *testing.T) {
	t.Helper()
	for _, v := range w.seen {
		t.Errorf("double attachment seen: %s", v)
	}
	if w.listed == 0 {
		t.Errorf("the watcher never listed the VolumeAttachments (last error: %v)", w.listErr)
	}
	t.Logf("watcher: %d samples of EC2's attachments, %d of the VolumeAttachments (last list error: %v)", w.n, w.listed, w.listErr)
}

// logFaults turns the faults off and logs how many of the phase's budget were used.
func logFaults(t *testing.T, s *Stack, phase string) {
	t.Helper()
	f := s.EC2.Faults()
	s.EC2.SetFaults(ec2sim.Faults{})
	t.Logf("%s: %d of its fault budget left unused", phase, f.Budget)
}

// answerCounts reads the emulator's answers by action and code (OK, RequestLimitExceeded, InternalError,
// Dropped, ...) from its Prometheus metrics.
func answerCounts(ctx context.Context, t *testing.T, s *Stack) (map[string]map[string]int, error) {
	code, b := rig.Get(t, ctx, s.EC2.URL()+"/metrics")
	if code != http.StatusOK {
		return nil, fmt.Errorf("GET %s/metrics: HTTP %d", s.EC2.URL(), code)
	}
	out := map[string]map[string]int{}
	for _, line := range strings.Split(b, "\n") {
		if !strings.HasPrefix(line, "ec2sim_requests_total{") {
			continue
		}
		_, rest, ok := strings.Cut(line, `action="`)
		action, rest, ok1 := strings.Cut(rest, `"`)
		_, rest, ok2 := strings.Cut(rest, `code="`)
		code, rest, ok3 := strings.Cut(rest, `"`)
		_, val, ok4 := strings.Cut(rest, "} ")
		n, err := strconv.ParseFloat(strings.TrimSpace(val), 64)
		if !ok || !ok1 || !ok2 || !ok3 || !ok4 || err != nil {
			return nil, fmt.Errorf("unexpected metrics line %q", line)
		}
		if out[action] == nil {
			out[action] = map[string]int{}
		}
		out[action][code] += int(n)
	}
	return out, nil
}
