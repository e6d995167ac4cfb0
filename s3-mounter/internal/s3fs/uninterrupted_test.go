package s3fs

import (
	"context"
	"testing"
)

type requestKey struct{}

// An interrupted FUSE request (its context cancelled by go-fuse) does not cancel its S3 calls; the end of the
// mount does, and the request's values stay.
func TestUninterruptedOutlivesTheRequestButNotTheMount(t *testing.T) {
	life, unmount := context.WithCancel(context.Background())
	defer unmount()
	f := &Filesystem{ctx: life}
	req, interrupt := context.WithCancel(context.WithValue(context.Background(), requestKey{}, "lookup"))
	ctx, done := f.uninterrupted(req)
	defer done()

	interrupt()
	if err := ctx.Err(); err != nil {
		t.Fatalf("the interrupt reached the S3 call: %v", err)
	}
	if v := ctx.Value(requestKey{}); v != "lookup" {
		t.Errorf("request value %v, want it kept", v)
	}
	unmount()
	<-ctx.Done()
	if ctx.Err() != context.Canceled {
		t.Errorf("after the mount ended: %v, want Canceled", ctx.Err())
	}
}
