package signals

import (
	"context"
	"syscall"
	"testing"
	"time"
)

func TestFirstSignalCancelsSecondExits(t *testing.T) {
	tests := []struct {
		name string
		sig  syscall.Signal
	}{
		{"SIGTERM", syscall.SIGTERM},
		{"SIGINT", syscall.SIGINT},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			exited := make(chan int, 1)
			ctx, stop := Context(context.Background(), func(code int) { exited <- code })
			defer stop()

			if err := syscall.Kill(syscall.Getpid(), tt.sig); err != nil {
				t.Fatal(err)
			}
			select {
			case <-ctx.Done():
			case <-time.After(30 * time.Second):
				t.Fatal("first signal did not cancel the context")
			}
			select {
			case code := <-exited:
				t.Fatalf("first signal exited with %d", code)
			default:
			}

			if err := syscall.Kill(syscall.Getpid(), tt.sig); err != nil {
				t.Fatal(err)
			}
			select {
			case code := <-exited:
				if code != 1 {
					t.Errorf("exit code %d, want 1", code)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("second signal did not exit")
			}
		})
	}
}

func TestStopCancelsWithoutSignal(t *testing.T) {
	ctx, stop := Context(context.Background(), func(int) { t.Error("exit called") })
	stop()
	select {
	case <-ctx.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("stop did not cancel the context")
	}
	stop() // idempotent
}
