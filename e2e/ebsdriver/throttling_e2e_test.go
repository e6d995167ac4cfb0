//go:build e2e

package ebsdriver

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"

	"github.com/stowage-csi/stowage/e2e/ec2sim"
	"github.com/stowage-csi/stowage/e2e/rig"
)

// TestE2EEBSThrottled sends ebs-plugin 30 CreateVolume at once, then 30 DeleteVolume, against EC2's request
// throttling scaled down to a twentieth of its capacity and a fifth of its refill (CreateVolume's bucket: 5
// tokens, 1 a second; an unfiltered DescribeVolumes: 2.5, 2 a second). Each CSI call is made once: the
// SDK's retries of RequestLimitExceeded and the plugin's batching of DescribeVolumes must finish every
// volume, each created exactly once. It prints the EC2 answers it took.
func TestE2EEBSThrottled(t *testing.T) {
	const (
		instanceID = "i-0207710575000a0e1"
		n          = 30
	)
	d := controllerDriver(t, instanceID)
	if err := d.sim.SetLimits(ec2sim.Limits{PerAction: &ec2sim.Throttling{CapacityScale: 0.05, RefillScale: 0.2}}); err != nil {
		t.Fatal(err)
	}
	ctx := testContext(t, 8*time.Minute)
	actions := []string{"CreateVolume", "DescribeVolumes", "DeleteVolume"}
	before := answers(d.sim, actions)

	name := func(i int) string { return fmt.Sprintf("pvc-throttled-%02d", i) }
	ids := make([]string, n)
	var mu sync.Mutex
	start := time.Now()
	err := rig.Parallel(n, n, func(i int) error {
		v, err := d.ctl.CreateVolume(ctx, volumeRequest(name(i), 1, mountCapability("ext4"), map[string]string{"type": "gp3"}))
		if err != nil {
			return fmt.Errorf("CreateVolume %s: %w", name(i), err)
		}
		mu.Lock()
		ids[i] = v.GetVolume().GetVolumeId()
		mu.Unlock()
		return nil
	})
	created := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	st := d.sim.State()
	for i, id := range ids {
		if got := volumesNamed(st, name(i)); len(got) != 1 || got[0] != id {
			t.Errorf("claim %s: EC2 holds volumes %v, want only %s", name(i), got, id)
		}
	}
	afterCreate := answers(d.sim, actions)

	start = time.Now()
	err = rig.Parallel(n, n, func(i int) error {
		if _, err := d.ctl.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: ids[i]}); err != nil {
			return fmt.Errorf("DeleteVolume %s: %w", ids[i], err)
		}
		return nil
	})
	deleted := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	if st := d.sim.State(); len(st.Volumes) != 0 {
		t.Errorf("left in EC2 after deleting every volume: %+v", st.Volumes)
	}
	after := answers(d.sim, actions)

	t.Logf("%d volumes created in %v and deleted in %v under EC2's throttling scaled (capacity x0.05, refill x0.2)", n, created.Round(time.Millisecond), deleted.Round(time.Millisecond))
	t.Logf("%-16s %22s %22s", "EC2 action", "create phase OK/503", "delete phase OK/503")
	throttled := 0
	for _, a := range actions {
		c, d := afterCreate[a].minus(before[a]), after[a].minus(afterCreate[a])
		throttled += c.throttled + d.throttled
		t.Logf("%-16s %22s %22s", a, fmt.Sprintf("%d/%d", c.ok, c.throttled), fmt.Sprintf("%d/%d", d.ok, d.throttled))
	}
	if throttled == 0 {
		t.Error("no request was throttled: the test did not exercise the model")
	}
}

type answerCount struct{ ok, throttled int }

func (a answerCount) minus(b answerCount) answerCount {
	return answerCount{a.ok - b.ok, a.throttled - b.throttled}
}

// answers is how many requests of each action ec2sim has answered OK and RequestLimitExceeded.
func answers(sim *ec2sim.Server, actions []string) map[string]answerCount {
	m := map[string]answerCount{}
	for _, a := range actions {
		m[a] = answerCount{sim.Requests(a, "OK"), sim.Requests(a, "RequestLimitExceeded")}
	}
	return m
}
