package rig

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestStopKillsTheWholeProcessGroup(t *testing.T) {
	dir := t.TempDir()
	// The shell forks a grandchild that ignores SIGTERM and prints its pid; stop must still end it.
	p, err := Start(Spec{Name: "group", Path: "/bin/sh", Args: []string{"-c", `(trap "" TERM; sleep 300) & echo "child $!"; wait`}, LogDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Stop(time.Second) })
	var child int
	Eventually(t, context.Background(), 10*time.Second, "the grandchild's pid in the log", func(context.Context) (bool, error) {
		for _, line := range strings.Split(p.Tail(10), "\n") {
			if pid, ok := strings.CutPrefix(line, "child "); ok {
				child, _ = strconv.Atoi(pid)
			}
		}
		return child != 0, nil
	})
	p.Stop(500 * time.Millisecond)
	if done, _ := p.Exited(); !done {
		t.Error("process still running after stop")
	}
	// The grandchild is re-parented and reaped by init once killed; a zombie is killed, waiting for init.
	Eventually(t, context.Background(), 10*time.Second, "grandchild "+strconv.Itoa(child)+" gone after stop", func(context.Context) (bool, error) {
		if err := syscall.Kill(child, 0); errors.Is(err, syscall.ESRCH) {
			return true, nil
		}
		data, err := os.ReadFile("/proc/" + strconv.Itoa(child) + "/stat")
		return err == nil && strings.Contains(string(data), ") Z "), nil
	})
}

func TestLogAndEnvironment(t *testing.T) {
	tests := []struct {
		name    string
		append  bool
		env     []string
		wantLog string
	}{
		{name: "truncates by default", env: []string{"GREETING=hi"}, wantLog: "hi\n"},
		{name: "appends with a header line", append: true, env: []string{"GREETING=hi"},
			wantLog: "old\n=== /bin/sh -c echo $GREETING\nhi\n"},
		{name: "passes exactly the environment given", env: []string{}, wantLog: "\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("GREETING", "inherited")
			dir := t.TempDir()
			if err := os.WriteFile(dir+"/echo.log", []byte("old\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			p, err := Start(Spec{Name: "echo", Path: "/bin/sh", Args: []string{"-c", "echo $GREETING"}, LogDir: dir,
				Env: tt.env, Append: tt.append})
			if err != nil {
				t.Fatal(err)
			}
			<-p.Done()
			if done, err := p.Exited(); !done || err != nil {
				t.Fatalf("Exited() = %v, %v; want true, nil", done, err)
			}
			p.Stop(time.Second) // a no-op for an ended process, but must not block
			got, err := os.ReadFile(p.LogPath)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.wantLog {
				t.Errorf("log = %q, want %q", got, tt.wantLog)
			}
		})
	}
}

func TestSignalAndWait(t *testing.T) {
	p, err := Start(Spec{Name: "sleeper", Path: "/bin/sleep", Args: []string{"300"}, LogDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Stop(time.Second) })
	short, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := p.Wait(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait on a running process = %v, want the context's deadline", err)
	}
	p.Signal(syscall.SIGTERM)
	err = p.Wait(context.Background())
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) {
		t.Fatalf("Wait after SIGTERM = %v, want an exit error", err)
	}
	if ws, ok := exitErr.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGTERM {
		t.Fatalf("Wait after SIGTERM = %v, want killed by SIGTERM", err)
	}
	p.Signal(syscall.SIGKILL) // an ended process is left alone, without blocking
}
