package testutil

import (
	"sync"
	"testing"

	"google.golang.org/protobuf/proto"
)

// WantRequest checks the requests a fake CSI driver recorded for one call (named call in the failure): none when
// want is nil, else exactly one, equal to want.
func WantRequest[R proto.Message](t testing.TB, call string, got []R, want R) {
	t.Helper()
	if !want.ProtoReflect().IsValid() {
		if len(got) != 0 {
			t.Errorf("%s called %d times, want 0", call, len(got))
		}
		return
	}
	if len(got) != 1 {
		t.Fatalf("%s called %d times, want 1", call, len(got))
	}
	if !proto.Equal(got[0], want) {
		t.Errorf("%s request = %v, want %v", call, got[0], want)
	}
}

// Answer is the body of a fake CSI driver's call: under mu it records req in calls, then returns *err when that
// is set, else *resp. The answers are read through pointers under mu so that a test may change them between
// calls; err may be nil for a call the fake never fails.
func Answer[Req, Resp any](mu *sync.Mutex, calls *[]Req, req Req, resp *Resp, err *error) (Resp, error) {
	mu.Lock()
	defer mu.Unlock()
	*calls = append(*calls, req)
	if err != nil && *err != nil {
		var zero Resp
		return zero, *err
	}
	return *resp, nil
}

// Record is Answer for a call that returns only an error.
func Record[Req any](mu *sync.Mutex, calls *[]Req, req Req, err *error) error {
	var none struct{}
	_, e := Answer(mu, calls, req, &none, err)
	return e
}
