package upload_test

import (
	"context"
	"errors"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stowage-csi/stowage/s3-mounter/internal/testutil"
	"github.com/stowage-csi/stowage/s3-mounter/internal/upload"
)

// guard bounds waits for things that happen at once when the code is right; reaching it fails the test.
const guard = 10 * time.Second

// TestWriteWaitingForASlotFailsOnceTheUploadIsAborted: Abort comes while the writer waits for a free
// upload slot, and the part in flight then succeeds anyway (its response was already on the way). The
// waiting write must see a finished upload: no new part may start and the write must fail.
func TestWriteWaitingForASlotFailsOnceTheUploadIsAborted(t *testing.T) {
	const size = 4096
	f := testutil.NewFakeS3()
	partStarted := make(chan struct{})
	var mu sync.Mutex
	var partsSeen []int32
	f.PartHook = func(ctx context.Context, n int32) error {
		mu.Lock()
		partsSeen = append(partsSeen, n)
		mu.Unlock()
		if n == 1 {
			close(partStarted)
			<-ctx.Done()
		}
		return nil
	}
	writeReturned := make(chan struct{})
	f.AbortHook = func(context.Context) error {
		// Abort's last step waits for the write, so the write cannot pass as "before the abort".
		select {
		case <-writeReturned:
			return nil
		case <-time.After(guard):
			return errors.New("the write waiting for a slot did not return")
		}
	}
	u := upload.New(context.Background(), f, "obj", upload.Config{PartSize: size, Concurrency: 1})
	var writeErr error
	go func() {
		defer close(writeReturned)
		// Part 1 goes out; part 2 waits for part 1's slot with the upload's lock released.
		_, writeErr = u.WriteAt(payload(2*size), 0)
	}()
	<-partStarted
	u.Abort()
	<-writeReturned
	if !errors.Is(writeErr, syscall.EBADF) {
		t.Errorf("write that waited through Abort: %v, want EBADF (upload finished)", writeErr)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(partsSeen) != 1 {
		t.Errorf("parts started: %v, want only part 1", partsSeen)
	}
	if f.PendingUploads() != 0 {
		t.Error("aborted upload left a pending multipart upload")
	}
	if _, ok := f.Object("obj"); ok {
		t.Error("object visible after Abort")
	}
}

// TestAbortMultipartIsBoundedAndOutlivesTheCaller: the AbortMultipart that removes a failed upload's
// parts runs with a deadline, on a context that the end of the caller's does not cancel, so an endpoint
// that never answers cannot hang Abort or Complete.
func TestAbortMultipartIsBoundedAndOutlivesTheCaller(t *testing.T) {
	const size = 4096
	tests := []struct {
		name     string
		failPart int32
		finish   func(*upload.Upload)
	}{
		{name: "Abort", finish: func(u *upload.Upload) { u.Abort() }},
		{name: "Complete after a failed part", failPart: 1, finish: func(u *upload.Upload) { _, _ = u.Complete() }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := testutil.NewFakeS3()
			f.FailPart = tc.failPart
			type call struct {
				live, deadline bool
			}
			calls := make(chan call, 1)
			f.AbortHook = func(ctx context.Context) error {
				_, deadline := ctx.Deadline()
				calls <- call{live: ctx.Err() == nil, deadline: deadline}
				// An endpoint that never answers.
				<-ctx.Done()
				return ctx.Err()
			}
			ctx, cancel := context.WithCancel(context.Background())
			u := upload.New(ctx, f, "obj", upload.Config{PartSize: size, Concurrency: 1, AbortTimeout: 50 * time.Millisecond})
			if _, err := u.WriteAt(payload(size), 0); err != nil {
				t.Fatal(err)
			}
			// The caller's context ends (the mount is stopping); the parts must still be removed.
			cancel()
			finished := make(chan struct{})
			go func() {
				defer close(finished)
				tc.finish(u)
			}()
			select {
			case <-finished:
			case <-time.After(guard):
				t.Fatalf("%s still waiting on an AbortMultipart that never answers after %s", tc.name, guard)
			}
			select {
			case c := <-calls:
				if !c.live || !c.deadline {
					t.Errorf("AbortMultipart context: live=%v deadline=%v, want a live context with a deadline", c.live, c.deadline)
				}
			default:
				t.Error("AbortMultipart was not called")
			}
		})
	}
}
