package slow

import (
	"testing"
	"time"
)

func TestSetWaitsForTheSameTargetOnly(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := New(time.Hour, func() time.Time { return now })
	s.Add("ns/c", "10Gi")
	if got := s.Remaining("ns/c", "10Gi"); got != time.Hour {
		t.Errorf("Remaining = %s, want 1h", got)
	}
	if got := s.Remaining("ns/c", "5Gi"); got != 0 {
		t.Errorf("Remaining for a new target = %s, want 0", got)
	}
	now = now.Add(40 * time.Minute)
	s.Add("ns/c", "10Gi") // a repeat does not push the retry out
	if got := s.Remaining("ns/c", "10Gi"); got != 20*time.Minute {
		t.Errorf("Remaining after 40m = %s, want 20m", got)
	}
	now = now.Add(time.Hour)
	if got := s.Remaining("ns/c", "10Gi"); got != 0 {
		t.Errorf("Remaining after the wait = %s, want 0", got)
	}
	s.Add("ns/c", "5Gi")
	s.Remove("ns/c")
	if got := s.Remaining("ns/c", "5Gi"); got != 0 {
		t.Errorf("Remaining after Remove = %s, want 0", got)
	}
}
