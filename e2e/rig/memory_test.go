package rig

import (
	"context"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestParseMemory(t *testing.T) {
	testParse(t, "parseMemory", parseMemory, []parseCase[Memory]{
		{name: "both lines", in: "Name:\tcsi-attacher\nVmPeak:\t 1300000 kB\nVmHWM:\t   51200 kB\nVmRSS:\t   40960 kB\nThreads:\t9\n",
			want: Memory{RSS: 40 << 20, Peak: 50 << 20}},
		{name: "no memory lines (kernel thread)", in: "Name:\tkthreadd\nState:\tS (sleeping)\n", wantErr: true},
		{name: "unit other than kB", in: "VmHWM:\t1 MB\nVmRSS:\t1 kB\n", wantErr: true},
		{name: "not a number", in: "VmHWM:\tlots kB\nVmRSS:\t1 kB\n", wantErr: true},
	})
}

func TestParseCPUTicks(t *testing.T) {
	testParse(t, "parseCPUTicks", parseCPUTicks, []parseCase[int64]{
		{name: "plain name", in: "42 (sleep) S 1 42 42 0 -1 4194560 100 0 0 0 7 3 0 0 20 0 1 0 100 1000 10\n", want: 10},
		{name: "name with spaces and parentheses", in: "42 (a) b (c) R 1 42 42 0 -1 0 0 0 0 0 120 30 0 0 20 0 1 0 100 1000 10", want: 150},
		{name: "no name", in: "42 sleep S 1", wantErr: true},
		{name: "too short", in: "42 (sleep) S 1 42", wantErr: true},
	})
}

// parseCase is one input of a parser's table test and the result, or an error, it should give.
type parseCase[T comparable] struct {
	name, in string
	want     T
	wantErr  bool
}

// testParse runs parse, called fn in failures, on each case as a subtest.
func testParse[T comparable](t *testing.T, fn string, parse func(string) (T, error), cases []parseCase[T]) {
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parse(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("%s error = %v, want error %v", fn, err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("%s = %+v, want %+v", fn, got, tt.want)
			}
		})
	}
}

func TestReadMemoryOfThisProcess(t *testing.T) {
	m, err := ReadMemory(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if m.RSS <= 0 || m.Peak < m.RSS {
		t.Errorf("ReadMemory(self) = %+v, want 0 < RSS <= peak", m)
	}
}

func TestWaitIdleReturnsForASleepingProcess(t *testing.T) {
	p, err := Start(Spec{Name: "sleeper", Path: "/bin/sleep", Args: []string{"300"}, LogDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Stop(time.Second) })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := WaitIdle(ctx, p.Pid(), 50*time.Millisecond, 0); err != nil {
		t.Fatalf("WaitIdle(sleep) = %v, want idle", err)
	}
}

func TestWaitIdleGivesUpWhenTheProcessIsGone(t *testing.T) {
	p, err := Start(Spec{Name: "quick", Path: "/bin/true", LogDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	<-p.Done()
	if _, err := WaitIdle(context.Background(), p.Pid(), 10*time.Millisecond, 0); err == nil {
		t.Fatal("WaitIdle of a reaped process succeeded, want an error")
	}
}

func TestWriteMemoryTableGrowthAndRatios(t *testing.T) {
	var out strings.Builder
	upstreamOf := func(string) string { return "up" }
	WriteMemoryTable(&out, []MemoryRow{
		{Sidecar: "ours", Objects: 0, Memory: Memory{RSS: 20 << 20, Peak: 22 << 20}, Synced: 100 * time.Millisecond},
		{Sidecar: "up", Objects: 0, Memory: Memory{RSS: 40 << 20, Peak: 40 << 20}, Synced: 200 * time.Millisecond},
		{Sidecar: "ours", Objects: 10000, Memory: Memory{RSS: 70 << 20, Peak: 90 << 20}, Synced: 1100 * time.Millisecond},
		{Sidecar: "up", Objects: 10000, Memory: Memory{RSS: 140 << 20, Peak: 200 << 20}, Synced: 4200 * time.Millisecond},
		// Growth is over the previous count, not the empty row; no upstream row at 30,000, so no ratio.
		{Sidecar: "ours", Objects: 30000, Memory: Memory{RSS: 110 << 20, Peak: 130 << 20}, Synced: 3100 * time.Millisecond},
	}, upstreamOf)
	want := "sidecar                   objects  RSS MiB  peak MiB  synced s   MiB/1,000 synced s/1,000    RSS/up   synced/up\n" +
		"ours                            0     20.0      22.0      0.10                                0.50x       0.50x\n" +
		"up                              0     40.0      40.0      0.20\n" +
		"ours                        10000     70.0      90.0      1.10        5.00          0.100     0.50x       0.26x\n" +
		"up                          10000    140.0     200.0      4.20       10.00          0.400\n" +
		"ours                        30000    110.0     130.0      3.10        2.00          0.100\n"
	if out.String() != want {
		t.Errorf("table:\n%s\nwant:\n%s", out.String(), want)
	}
}

func TestParseCounts(t *testing.T) {
	tests := []struct {
		in      string
		want    []int
		wantErr bool
	}{
		{in: "", want: []int{10000}},
		{in: "100000", want: []int{100000}},
		{in: "10000, 50000,100000", want: []int{10000, 50000, 100000}},
		{in: "10000,10000", wantErr: true},
		{in: "0", wantErr: true},
		{in: "10k", wantErr: true},
	}
	for _, tt := range tests {
		got, err := parseCounts(tt.in)
		if (err != nil) != tt.wantErr || !slices.Equal(got, tt.want) {
			t.Errorf("parseCounts(%q) = %v, %v; want %v, error %v", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestLoggedAtReadsTheKlogHeaderOfTheFirstMatchingLine(t *testing.T) {
	near := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	log := "I1207 10:00:01.000000       7 main.go:1] \"Starting\"\n" +
		"I1207 10:00:02.250000       7 controller.go:9] \"Caches synced, starting workers\"\n" +
		"I1207 10:00:09.000000       7 controller.go:9] \"Caches synced, starting workers\"\n"
	at, found, err := loggedAt(log, "Caches synced", near)
	if err != nil || !found || !at.Equal(near.Add(2250*time.Millisecond)) {
		t.Errorf("loggedAt = %v, %v, %v; want %v", at, found, err, near.Add(2250*time.Millisecond))
	}
	if _, found, err := loggedAt(log, "never logged", near); found || err != nil {
		t.Errorf("loggedAt of an absent line = %v, %v; want not found", found, err)
	}
	if _, _, err := loggedAt("Caches synced without a header\n", "Caches synced", near); err == nil {
		t.Error("loggedAt of a line without a klog header succeeded, want an error")
	}
	newYear := time.Date(2026, 12, 31, 23, 59, 59, 0, time.UTC)
	at, _, err = loggedAt("I0101 00:00:01.000000 7 x.go:1] ready\n", "ready", newYear)
	if err != nil || !at.Equal(newYear.Add(2*time.Second)) {
		t.Errorf("loggedAt across the new year = %v, %v; want %v", at, err, newYear.Add(2*time.Second))
	}
}

func TestMedianMemoryTakesEachFieldsMedian(t *testing.T) {
	tests := []struct {
		name     string
		readings []Memory
		want     Memory
	}{
		{name: "none", want: Memory{}},
		{name: "one", readings: []Memory{{RSS: 5, Peak: 7}}, want: Memory{RSS: 5, Peak: 7}},
		{name: "odd, fields from different readings", readings: []Memory{{RSS: 9, Peak: 10}, {RSS: 1, Peak: 30}, {RSS: 5, Peak: 20}},
			want: Memory{RSS: 5, Peak: 20}},
		{name: "even takes the upper middle", readings: []Memory{{RSS: 4, Peak: 4}, {RSS: 1, Peak: 1}, {RSS: 3, Peak: 3}, {RSS: 2, Peak: 2}},
			want: Memory{RSS: 3, Peak: 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := MedianMemory(tt.readings); got != tt.want {
				t.Errorf("MedianMemory = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestListFloorRunsTheListsTogether(t *testing.T) {
	// Each list waits for the other to start: run one after the other, they would never finish.
	var a, b sync.WaitGroup
	a.Add(1)
	b.Add(1)
	calls := 0
	var mu sync.Mutex
	list := func(mine, other *sync.WaitGroup) func(context.Context) error {
		return func(context.Context) error {
			mu.Lock()
			calls++
			mu.Unlock()
			mine.Done()
			other.Wait()
			return nil
		}
	}
	if _, err := ListFloor(context.Background(), 1, list(&a, &b), list(&b, &a)); err != nil {
		t.Fatal(err)
	}
	if calls != 2 {
		t.Errorf("%d lists ran, want 2", calls)
	}
	if _, err := ListFloor(context.Background(), 0, list(&a, &b)); err == nil {
		t.Error("ListFloor with no rounds succeeded, want an error")
	}
}

func TestListFloorLineSortsTheCounts(t *testing.T) {
	got := ListFloorLine("VAs and PVs", map[int]time.Duration{100000: 12500 * time.Millisecond, 10000: 1200 * time.Millisecond})
	want := "list floor (VAs and PVs, all at once, from the watch cache, medians of 3): 10000 objects 1.20 s, 100000 objects 12.50 s"
	if got != want {
		t.Errorf("ListFloorLine = %q, want %q", got, want)
	}
}
