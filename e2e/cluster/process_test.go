package cluster

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestStopKillsTheWholeProcessGroup(t *testing.T) {
	dir := t.TempDir()
	// The shell forks a grandchild that ignores SIGTERM and prints its pid; stop must still end it.
	p, err := startProcess("group", "/bin/sh", []string{"-c", `(trap "" TERM; sleep 300) & echo "child $!"; wait`}, dir)
	if err != nil {
		t.Fatal(err)
	}
	var child int
	deadline := time.Now().Add(10 * time.Second)
	for child == 0 && time.Now().Before(deadline) {
		for _, line := range strings.Split(p.tail(10), "\n") {
			if pid, ok := strings.CutPrefix(line, "child "); ok {
				child, _ = strconv.Atoi(pid)
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	if child == 0 {
		p.stop(time.Second)
		t.Fatalf("grandchild pid never logged; log:\n%s", p.tail(10))
	}
	p.stop(500 * time.Millisecond)
	if done, _ := p.exited(); !done {
		t.Error("process still running after stop")
	}
	// The grandchild is re-parented and reaped by init once killed; poll until its pid is gone.
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if err := syscall.Kill(child, 0); errors.Is(err, syscall.ESRCH) {
			return
		}
		if data, err := os.ReadFile("/proc/" + strconv.Itoa(child) + "/stat"); err == nil && strings.Contains(string(data), ") Z ") {
			return // killed, waiting for init to reap it
		}
	}
	t.Errorf("grandchild %d survived stop", child)
}

func TestFailureShowsLogTailAndDetectsPortClash(t *testing.T) {
	dir := t.TempDir()
	p, err := startProcess("clash", "/bin/sh", []string{"-c", `echo "listen tcp 127.0.0.1:1234: bind: address already in use"; exit 1`}, dir)
	if err != nil {
		t.Fatal(err)
	}
	err = p.waitReady(context.Background(), 30*time.Second, func(context.Context) error { return errors.New("not yet") })
	if err == nil {
		t.Fatal("waitReady succeeded for a process that exited")
	}
	if !errors.Is(err, errPortClash) {
		t.Errorf("error %v does not wrap errPortClash", err)
	}
	if !strings.Contains(err.Error(), "address already in use") {
		t.Errorf("error does not show the log tail: %v", err)
	}
}

func TestWaitReadyReturnsWhenReady(t *testing.T) {
	p, err := startProcess("sleeper", "/bin/sh", []string{"-c", "sleep 300"}, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer p.stop(time.Second)
	calls := 0
	err = p.waitReady(context.Background(), 30*time.Second, func(context.Context) error {
		if calls++; calls < 3 {
			return errors.New("not yet")
		}
		return nil
	})
	if err != nil || calls != 3 {
		t.Errorf("waitReady = %v after %d checks, want nil after 3", err, calls)
	}
}

func TestRetryOnPortClash(t *testing.T) {
	other := errors.New("bad flag")
	tests := []struct {
		name      string
		results   []error
		wantCalls int
		wantErr   error
	}{
		{name: "first start works", results: []error{nil}, wantCalls: 1},
		{name: "clash then success", results: []error{errPortClash, nil}, wantCalls: 2},
		{name: "other errors are not retried", results: []error{other}, wantCalls: 1, wantErr: other},
		{name: "gives up after three clashes", results: []error{errPortClash, errPortClash, errPortClash, nil}, wantCalls: 3, wantErr: errPortClash},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			calls := 0
			err := retryOnPortClash(2, func(ports []int) error {
				if len(ports) != 2 {
					t.Errorf("got %d ports, want 2", len(ports))
				}
				calls++
				return tt.results[calls-1]
			})
			if calls != tt.wantCalls {
				t.Errorf("start called %d times, want %d", calls, tt.wantCalls)
			}
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil) {
				t.Errorf("err = %v, want %v", err, tt.wantErr)
			}
		})
	}
}
