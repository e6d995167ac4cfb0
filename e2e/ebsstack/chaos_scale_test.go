package ebsstack

import (
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func TestChaosScaleFromEnv(t *testing.T) {
	for _, tc := range []struct {
		name    string
		env     map[string]string
		want    ChaosScale
		wantErr bool
	}{
		{name: "unset is the short form", want: ChaosScale{PerNode: 8, KillEvery: 20 * time.Second}},
		{name: "all set", env: map[string]string{ChaosLifecyclesEnv: "200", ChaosPerNodeEnv: "5", ChaosKillEveryEnv: "30s"},
			want: ChaosScale{Lifecycles: 200, PerNode: 5, KillEvery: 30 * time.Second}},
		{name: "lifecycles not a number", env: map[string]string{ChaosLifecyclesEnv: "many"}, wantErr: true},
		{name: "zero per node", env: map[string]string{ChaosPerNodeEnv: "0"}, wantErr: true},
		{name: "negative lifecycles", env: map[string]string{ChaosLifecyclesEnv: "-1"}, wantErr: true},
		{name: "kill interval without a unit", env: map[string]string{ChaosKillEveryEnv: "20"}, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ChaosScaleFromEnv(func(k string) string { return tc.env[k] })
			if (err != nil) != tc.wantErr || (!tc.wantErr && got != tc.want) {
				t.Errorf("ChaosScaleFromEnv = %+v, %v; want %+v, error %v", got, err, tc.want, tc.wantErr)
			}
		})
	}
}

func TestWavesSplitTheLifecycles(t *testing.T) {
	for _, tc := range []struct {
		n, size int
		want    []int
	}{{200, 24, []int{24, 24, 24, 24, 24, 24, 24, 24, 8}}, {40, 24, []int{24, 16}}, {9, 24, []int{9}}, {0, 24, nil}} {
		if got := Waves(tc.n, tc.size); !slices.Equal(got, tc.want) {
			t.Errorf("Waves(%d, %d) = %v, want %v", tc.n, tc.size, got, tc.want)
		}
	}
}

func TestPlanEveryKillsEachTargetOncePerRoundAndReplays(t *testing.T) {
	targets := []string{"csi-provisioner", "csi-attacher", "ebs-plugin-controller"}
	plan := PlanEvery(rand.New(rand.NewPCG(7, 1)), 20*time.Second, 65*time.Second, targets)
	if len(plan) != 3 {
		t.Fatalf("%d kills in 65 s at one per 20 s, want 3: %v", len(plan), plan)
	}
	for i, k := range plan {
		if k.At != time.Duration(i+1)*20*time.Second || !slices.Contains(targets, k.Target) {
			t.Errorf("kill %d = %+v, want at %ds one of %v", i, k, (i+1)*20, targets)
		}
	}
	rounds := PlanEvery(rand.New(rand.NewPCG(7, 1)), time.Second, 31*time.Second, targets)
	for i := 0; i+len(targets) <= len(rounds); i += len(targets) {
		var got []string
		for _, k := range rounds[i : i+len(targets)] {
			got = append(got, k.Target)
		}
		if slices.Sort(got); !slices.Equal(got, slices.Sorted(slices.Values(targets))) {
			t.Errorf("kills %d to %d hit %v, want each of %v once", i, i+len(targets)-1, got, targets)
		}
	}
	reversed := slices.Clone(targets)
	slices.Reverse(reversed)
	if again := PlanEvery(rand.New(rand.NewPCG(7, 1)), 20*time.Second, 65*time.Second, reversed); !slices.Equal(again, plan) {
		t.Errorf("the same seed planned %v, then %v with the targets in another order", plan, again)
	}
}

func TestFaultsByKindSplitsMutatingFromDescribe(t *testing.T) {
	calls, faults := faultsByKind(map[string]map[string]int{
		"AttachVolume":    {"OK": 10, "RequestLimitExceeded": 2, "LostAnswerDropped": 1, "IncorrectState": 1},
		"CreateSnapshot":  {"OK": 3, "LostAnswerInternalError": 1, "InternalError": 1},
		"DescribeVolumes": {"OK": 20, "RequestLimitExceeded": 4, "Dropped": 1, "InternalError": 2},
	})
	// Every answer is a call, the refused ones included; only the injected codes are faults.
	if want := (FaultCounts{Mutating: 19, Describe: 27}); calls != want {
		t.Errorf("calls %+v, want %+v", calls, want)
	}
	want := map[string]FaultCounts{
		"throttled (503)":                 {Mutating: 2, Describe: 4},
		"5xx (500)":                       {Mutating: 1, Describe: 2},
		"dropped connection":              {Describe: 1},
		"lost answer (connection closed)": {Mutating: 1},
		"lost answer (500)":               {Mutating: 1},
	}
	if !maps.Equal(faults, want) {
		t.Errorf("faults %v, want %v", faults, want)
	}
}
