package rig

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseAuditKeepsCompletedWritesInOrder(t *testing.T) {
	log := `{"verb":"create","stage":"ResponseComplete","user":{"username":"admin"},"objectRef":{"resource":"volumeattachments","name":"va-1"},"responseStatus":{"code":201}}
{"verb":"patch","stage":"ResponseStarted","user":{"username":"sa"},"objectRef":{"resource":"volumeattachments","name":"va-1"},"responseStatus":{"code":200}}
{"verb":"patch","stage":"ResponseComplete","user":{"username":"sa"},"userAgent":"csi-attacher/v0.0.0 (linux/amd64)","objectRef":{"resource":"volumeattachments","subresource":"status","name":"va-1"},"responseStatus":{"code":200},"stageTimestamp":"2026-11-27T00:10:02.123456Z"}
`
	got, err := parseAudit(strings.NewReader(log))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"create volumeattachments va-1 201 admin", "patch volumeattachments/status va-1 200 sa"}
	if !slices.Equal(Strings(got), want) {
		t.Errorf("writes = %q, want %q", Strings(got), want)
	}
	if !got[0].Time.IsZero() || !got[1].Time.Equal(time.Date(2026, 11, 27, 0, 10, 2, 123456000, time.UTC)) {
		t.Errorf("times = %v, %v; want zero (none in the log) and the second write's stageTimestamp", got[0].Time, got[1].Time)
	}
	if got[0].UserAgent != "" || got[1].UserAgent != "csi-attacher/v0.0.0 (linux/amd64)" {
		t.Errorf("user agents = %q, %q; want none and the second write's", got[0].UserAgent, got[1].UserAgent)
	}
	if by := Strings(Filter(got, ByUser("sa"))); !slices.Equal(by, want[1:]) {
		t.Errorf("writes by sa = %q, want %q", by, want[1:])
	}
}

func TestParseAuditRejectsAGarbledLine(t *testing.T) {
	if _, err := parseAudit(strings.NewReader("not json\n")); err == nil {
		t.Fatal("parseAudit of a garbled line: nil error")
	}
}

func TestNewAuditLogPolicyNamesEachResourceAndItsStatus(t *testing.T) {
	dir := t.TempDir()
	a, err := NewAuditLog(dir, "storage.k8s.io/volumeattachments", "/persistentvolumes")
	if err != nil {
		t.Fatal(err)
	}
	policy, err := os.ReadFile(filepath.Join(dir, "audit-policy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`- group: "storage.k8s.io"` + "\n" + `    resources: ["volumeattachments", "volumeattachments/status"]`,
		`- group: ""` + "\n" + `    resources: ["persistentvolumes", "persistentvolumes/status"]`,
	} {
		if !strings.Contains(string(policy), want) {
			t.Errorf("policy lacks %q:\n%s", want, policy)
		}
	}
	if args := a.APIServerArgs(); !slices.Contains(args, "--audit-log-path="+filepath.Join(dir, "audit.log")) {
		t.Errorf("kube-apiserver args %q lack the log path", args)
	}
	if _, err := NewAuditLog(dir, "persistentvolumes"); err == nil {
		t.Error("a resource without a group: nil error")
	}
}
