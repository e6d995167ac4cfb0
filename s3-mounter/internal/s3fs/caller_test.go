package s3fs

import (
	"os"
	"testing"
)

func TestThreadGroupOfThisProcess(t *testing.T) {
	if got := threadGroup(uint32(os.Getpid())); got != uint32(os.Getpid()) {
		t.Errorf("threadGroup(own pid) = %d, want %d", got, os.Getpid())
	}
	// A thread of this process resolves to the process.
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range tasks {
		var tid uint32
		for _, c := range task.Name() {
			tid = tid*10 + uint32(c-'0')
		}
		if got := threadGroup(tid); got != uint32(os.Getpid()) {
			t.Errorf("threadGroup(thread %d) = %d, want %d", tid, got, os.Getpid())
		}
	}
	// Unknown IDs fall back to themselves.
	if got := threadGroup(1 << 30); got != 1<<30 {
		t.Errorf("threadGroup(unknown) = %d", got)
	}
}
