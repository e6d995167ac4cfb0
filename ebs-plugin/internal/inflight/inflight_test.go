package inflight

import "testing"

func TestSetRefusesDuplicateUntilReleased(t *testing.T) {
	s := New()
	release, ok := s.Insert("vol-1")
	if !ok {
		t.Fatal("first insert refused")
	}
	if _, ok := s.Insert("vol-1"); ok {
		t.Fatal("duplicate accepted")
	}
	if r2, ok := s.Insert("vol-2"); !ok {
		t.Fatal("other key refused")
	} else {
		r2()
	}
	release()
	release() // a second release must not free someone else's claim
	r3, ok := s.Insert("vol-1")
	if !ok {
		t.Fatal("insert after release refused")
	}
	release()
	if _, ok := s.Insert("vol-1"); ok {
		t.Fatal("stale release freed a newer claim")
	}
	r3()
}
