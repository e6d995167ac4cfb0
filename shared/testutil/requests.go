package testutil

import (
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
