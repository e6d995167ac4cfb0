//go:build e2e

package ebsstack

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestE2EEBSExpandModify runs the expand-and-modify scenario on the whole stack with csi-resizer, every
// container with the args of upstream's own manifests, then checks that stopping the stack leaves no process,
// loop device or mount behind.
func TestE2EEBSExpandModify(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	s := startTestStack(ctx, t, Options{UpstreamArgs: true, With: []string{"csi-resizer"}}, nil)
	var out strings.Builder
	report := NewReport(&out)
	l, err := NewLifecycle(s.Stack, report)
	if err != nil {
		t.Fatal(err)
	}
	err = l.ExpandModify(ctx)
	t.Logf("steps:%s", out.String())
	if err != nil {
		t.Fatalf("expand and modify: %v", err)
	}
	s.stopLeavesNothing(t)
}
