package rig

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"
)

func TestParseMemory(t *testing.T) {
	tests := []struct {
		name    string
		status  string
		want    Memory
		wantErr bool
	}{
		{name: "both lines", status: "Name:\tcsi-attacher\nVmPeak:\t 1300000 kB\nVmHWM:\t   51200 kB\nVmRSS:\t   40960 kB\nThreads:\t9\n",
			want: Memory{RSS: 40 << 20, Peak: 50 << 20}},
		{name: "no memory lines (kernel thread)", status: "Name:\tkthreadd\nState:\tS (sleeping)\n", wantErr: true},
		{name: "unit other than kB", status: "VmHWM:\t1 MB\nVmRSS:\t1 kB\n", wantErr: true},
		{name: "not a number", status: "VmHWM:\tlots kB\nVmRSS:\t1 kB\n", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseMemory(tt.status)
			if (err != nil) != tt.wantErr {
				t.Fatalf("parseMemory error = %v, want error %v", err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("parseMemory = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestParseCPUTicks(t *testing.T) {
	tests := []struct {
		name    string
		stat    string
		want    int64
		wantErr bool
	}{
		{name: "plain name", stat: "42 (sleep) S 1 42 42 0 -1 4194560 100 0 0 0 7 3 0 0 20 0 1 0 100 1000 10\n", want: 10},
		{name: "name with spaces and parentheses", stat: "42 (a) b (c) R 1 42 42 0 -1 0 0 0 0 0 120 30 0 0 20 0 1 0 100 1000 10", want: 150},
		{name: "no name", stat: "42 sleep S 1", wantErr: true},
		{name: "too short", stat: "42 (sleep) S 1 42", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseCPUTicks(tt.stat)
			if (err != nil) != tt.wantErr {
				t.Fatalf("parseCPUTicks error = %v, want error %v", err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("parseCPUTicks = %d, want %d", got, tt.want)
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

func TestWriteMemoryTableScalesGrowthOverTheBaseline(t *testing.T) {
	var out strings.Builder
	WriteMemoryTable(&out, []MemoryRow{
		{Sidecar: "csi-attacher", Objects: 0, Memory: Memory{RSS: 20 << 20, Peak: 22 << 20}},
		{Sidecar: "csi-attacher", Objects: 10000, Memory: Memory{RSS: 70 << 20, Peak: 90 << 20}},
		{Sidecar: "other", Objects: 500, Memory: Memory{RSS: 30 << 20, Peak: 30 << 20}},
	})
	want := "sidecar            objects   RSS MiB   peak MiB  RSS MiB/1,000 objects\n" +
		"csi-attacher             0      20.0       22.0                       \n" +
		"csi-attacher         10000      70.0       90.0                   5.00\n" +
		"other                  500      30.0       30.0                       \n"
	if out.String() != want {
		t.Errorf("table:\n%s\nwant:\n%s", out.String(), want)
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
