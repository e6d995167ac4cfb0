package cluster

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

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
	defer p.Stop(time.Second)
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
