package devicemanager

import (
	"errors"
	"testing"
	"time"
)

func TestAssign(t *testing.T) {
	m := New()
	d1, err := m.Assign("i-1", "vol-1", map[string]string{"/dev/xvda": "vol-root"})
	if err != nil || d1.Name != "/dev/xvdaa" {
		t.Fatalf("first: %+v %v", d1, err)
	}
	d2, _ := m.Assign("i-1", "vol-2", nil)
	if d2.Name != "/dev/xvdab" {
		t.Fatalf("concurrent attach got %s, want /dev/xvdab", d2.Name)
	}
	again, _ := m.Assign("i-1", "vol-1", nil)
	if again.Name != d1.Name {
		t.Fatalf("in-flight volume got a new name %s", again.Name)
	}
	other, _ := m.Assign("i-2", "vol-3", nil)
	if other.Name != "/dev/xvdaa" {
		t.Fatalf("other node got %s", other.Name)
	}
	existing, _ := m.Assign("i-1", "vol-9", map[string]string{"/dev/xvdzz": "vol-9"})
	if !existing.Existing || existing.Name != "/dev/xvdzz" {
		t.Fatalf("existing mapping not reused: %+v", existing)
	}
	d1.Release(false)
	d3, _ := m.Assign("i-1", "vol-4", nil)
	if d3.Name != "/dev/xvdaa" {
		t.Fatalf("released name not reused: %s", d3.Name)
	}
	d2.Release(true)
	d5, _ := m.Assign("i-1", "vol-5", nil)
	if d5.Name != "/dev/xvdac" {
		t.Fatalf("tainted name reused: %s", d5.Name)
	}
}

func TestLikelyBadNamesAreLastResortAndExpire(t *testing.T) {
	m := New()
	now := time.Unix(1000, 0)
	m.now = func() time.Time { return now }
	m.MarkLikelyBad("i-1", "/dev/xvdaa")
	d, _ := m.Assign("i-1", "vol-1", nil)
	if d.Name != "/dev/xvdab" {
		t.Fatalf("got %s", d.Name)
	}
	d.Release(false)
	now = now.Add(LikelyBadTTL + time.Second)
	d, _ = m.Assign("i-1", "vol-1", nil)
	if d.Name != "/dev/xvdaa" {
		t.Fatalf("expired bad name not used: %s", d.Name)
	}
	d.Release(false)
	mapped := map[string]string{}
	for i, n := range allNames() {
		if n != "/dev/xvdab" {
			mapped[n] = "vol-x" + string(rune('a'+i%26))
		}
	}
	m.MarkLikelyBad("i-1", "/dev/xvdab")
	d, err := m.Assign("i-1", "vol-2", mapped)
	if err != nil || d.Name != "/dev/xvdab" {
		t.Fatalf("last resort: %+v %v", d, err)
	}
	mapped["/dev/xvdab"] = "vol-y"
	if _, err := m.Assign("i-1", "vol-3", mapped); !errors.As(err, new(ErrNoFreeName)) {
		t.Fatalf("full node: %v", err)
	}
}
